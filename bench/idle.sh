# idle.sh — hookd at rest with many inbound sources (bench/idle_sources.mjs): the periodic
# refresh every node runs must stay cheap as sources grow. Ceiling: 10 % of one core with
# BENCH_IDLE_SOURCES (20,000) sources.

idle_main() {
  local n=${BENCH_IDLE_SOURCES:-20000} line pct
  say ""
  say "## Idle cost with $n inbound sources"
  line=$(HOOKD_BIN="$PWD/build/hookd" N="$n" node bench/idle_sources.mjs 2>/dev/null | grep '^idle_cpu_pct=') || {
    say "idle run failed"
    return 0
  }
  say "$line"
  pct=${line#idle_cpu_pct=}
  pct=${pct%% *}
  say "RESULT idle CPU with $n sources: ${pct}% of one core — ceiling <= 10%: $(awk -v p="$pct" 'BEGIN { print (p <= 10) ? "PASS" : "MISS" }')"
}
