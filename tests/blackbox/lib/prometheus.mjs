// prometheus.mjs — a strict reader of the Prometheus text format (0.0.4) for the tests: it
// throws on what a scraper could reject or misread, and returns the samples.
//
// Checked: every family has one HELP and one TYPE line before its samples, and its samples are
// contiguous; names and label names are valid, label values correctly escaped; no series twice;
// values are numbers; a histogram's buckets are cumulative with increasing `le`, end at +Inf,
// and its _count equals the +Inf bucket, with a _sum.
const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function parseLabels(s, where) {
  const labels = {};
  let i = 0;
  while (i < s.length) {
    const eq = s.indexOf('=', i);
    if (eq < 0) throw new Error(`${where}: label without '='`);
    const name = s.slice(i, eq);
    if (!LABEL.test(name)) throw new Error(`${where}: bad label name ${JSON.stringify(name)}`);
    if (s[eq + 1] !== '"') throw new Error(`${where}: label value not quoted`);
    let j = eq + 2, v = '';
    for (; j < s.length && s[j] !== '"'; j++) {
      if (s[j] === '\\') {
        const n = s[++j];
        if (n === 'n') v += '\n'; else if (n === '\\' || n === '"') v += n;
        else throw new Error(`${where}: bad escape \\${n}`);
      } else if (s[j] === '\n') {
        throw new Error(`${where}: newline in a label value`);
      } else v += s[j];
    }
    if (s[j] !== '"') throw new Error(`${where}: unterminated label value`);
    if (name in labels) throw new Error(`${where}: label ${name} twice`);
    labels[name] = v;
    i = j + 1;
    if (s[i] === ',') i++;
    else if (i < s.length) throw new Error(`${where}: expected ',' after a label`);
  }
  return labels;
}

const baseOf = (name, types) => {
  for (const suf of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suf) && types.get(name.slice(0, -suf.length)) === 'histogram') return name.slice(0, -suf.length);
  }
  return name;
};

export function parsePrometheus(text) {
  if (!text.endsWith('\n')) throw new Error('the exposition does not end with a newline');
  const help = new Map(), types = new Map(), samples = [], seen = new Set(), done = new Set();
  let current = null;
  for (const [n, line] of text.slice(0, -1).split('\n').entries()) {
    const where = `line ${n + 1} (${line.slice(0, 80)})`;
    if (line.startsWith('# ')) {
      const [, kind, name, ...rest] = line.split(' ');
      if (kind !== 'HELP' && kind !== 'TYPE') continue;
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
      const map = kind === 'HELP' ? help : types;
      if (map.has(name)) throw new Error(`${where}: ${kind} of ${name} twice`);
      if (done.has(name) || samples.some((s) => s.family === name)) throw new Error(`${where}: ${kind} after samples of ${name}`);
      if (kind === 'TYPE' && !['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest[0])) throw new Error(`${where}: bad type`);
      map.set(name, kind === 'HELP' ? rest.join(' ') : rest[0]);
      if (current && current !== name) done.add(current);
      current = name;
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([^\s{]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`${where}: not a sample`);
    const [, name, rawLabels = '', value] = m;
    if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
    const family = baseOf(name, types);
    if (!types.has(family) || !help.has(family)) throw new Error(`${where}: no HELP/TYPE for ${family}`);
    if (family !== current) {
      if (done.has(family)) throw new Error(`${where}: samples of ${family} are not contiguous`);
      if (current) done.add(current);
      current = family;
    }
    const v = Number(value === '+Inf' ? Infinity : value === '-Inf' ? -Infinity : value);
    if (Number.isNaN(v) && value !== 'NaN') throw new Error(`${where}: bad value`);
    const labels = parseLabels(rawLabels, where);
    const key = name + JSON.stringify(Object.entries(labels).sort());
    if (seen.has(key)) throw new Error(`${where}: series twice`);
    seen.add(key);
    samples.push({ family, name, labels, value: v });
  }
  for (const [family, type] of types) {
    if (type !== 'histogram') continue;
    const groups = new Map();
    for (const s of samples.filter((x) => x.family === family)) {
      const { le, ...rest } = s.labels;
      const g = JSON.stringify(Object.entries(rest).sort());
      if (!groups.has(g)) groups.set(g, { buckets: [], sum: null, count: null });
      const e = groups.get(g);
      if (s.name.endsWith('_bucket')) e.buckets.push([le === '+Inf' ? Infinity : Number(le), s.value]);
      else if (s.name.endsWith('_sum')) e.sum = s.value;
      else if (s.name.endsWith('_count')) e.count = s.value;
    }
    for (const e of groups.values()) {
      const b = e.buckets;
      if (!b.length || b.at(-1)[0] !== Infinity) throw new Error(`${family}: no +Inf bucket`);
      for (let i = 1; i < b.length; i++) {
        if (!(b[i][0] > b[i - 1][0])) throw new Error(`${family}: le not increasing`);
        if (b[i][1] < b[i - 1][1]) throw new Error(`${family}: buckets not cumulative`);
      }
      if (e.sum === null || e.count === null) throw new Error(`${family}: _sum or _count missing`);
      if (e.count !== b.at(-1)[1]) throw new Error(`${family}: _count ${e.count} != +Inf bucket ${b.at(-1)[1]}`);
    }
  }
  return samples;
}

// The value of one series (labels must match exactly), or undefined.
export function sampleValue(samples, name, labels = {}) {
  const want = JSON.stringify(Object.entries(labels).sort());
  return samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === want)?.value;
}
