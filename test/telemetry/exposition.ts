/** A small parser of the Prometheus text exposition format, for tests. */

/** Sample values by series key: `name{label="v",…}` with labels sorted by name (`name` alone without labels). */
export type Samples = Map<string, number>;

const LINE_RE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL_RE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parses every sample line (comments skipped); throws on a line it cannot read. */
export function parseExposition(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const m = LINE_RE.exec(line);
    if (!m) throw new Error(`not an exposition line: ${line}`);
    const labels = [...(m[2] ?? '').matchAll(LABEL_RE)].map((l) => [l[1]!, l[2]!] as const).sort(([a], [b]) => a.localeCompare(b));
    const key = labels.length === 0 ? m[1]! : `${m[1]}{${labels.map(([k, v]) => `${k}="${v}"`).join(',')}}`;
    const raw = m[3]!;
    out.set(key, raw === '+Inf' ? Number.POSITIVE_INFINITY : raw === '-Inf' ? Number.NEGATIVE_INFINITY : Number(raw));
  }
  return out;
}
