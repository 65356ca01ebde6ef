# idle.sh — hookd at rest with many inbound sources (bench/idle_sources.mjs): the periodic
# refresh every node runs must stay cheap as sources grow. Ceiling: 10 % of one core with
# BENCH_IDLE_SOURCES (20,000) sources.

idle_main() {
  local n=${BENCH_IDLE_SOURCES:-20000} line pct
  say ""
  say "## Idle cost with $n inbound sources"
  line=$(node_line bench/idle_sources.mjs idle_cpu_pct= N="$n") || {
    say "idle run failed"
    return 0
  }
  say "$line"
  pct=$(field idle_cpu_pct "$line")
  say "RESULT idle CPU with $n sources: ${pct}% of one core — ceiling <= 10%: $(at_most "$pct" 10)"
}
