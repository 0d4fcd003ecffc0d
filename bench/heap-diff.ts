/**
 * `npm run bench -- heap-diff A.heapsnapshot B.heapsnapshot [rows]`: what a
 * process kept between two heap snapshots of the same run (`BENCH_HEAP_SNAPSHOTS`
 * in the soak bench writes them). V8 keeps an object's snapshot id for its
 * lifetime, so the objects of B whose id is not in A were allocated between
 * the two and are still alive.
 *
 * Prints the growth by node type and by constructor (count and self size),
 * split into compiled code (machine code, bytecode, feedback vectors and
 * their dependency lists, hidden classes: bounded by the program, not by
 * the load) and data (everything else), then the biggest groups of new
 * objects with one retainer path each (the first retainer that is old,
 * i.e. where the new objects hang off what was already there).
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  nodes: number[];
  edges: number[];
  strings: string[];
  nodeTypes: string[];
  edgeTypes: string[];
  /** Fields per node / edge, and the field offsets used here. */
  n: { width: number; type: number; name: number; id: number; size: number; edges: number };
  e: { width: number; type: number; name: number; to: number };
  count: number;
  /** Index into `edges` of each node's first edge (`count + 1` entries). */
  firstEdge: Uint32Array;
}

interface Group {
  count: number;
  bytes: number;
  /** A few node indexes, for retainer paths. */
  samples: number[];
}

interface RawSnapshot {
  snapshot: { meta: { node_fields: string[]; edge_fields: string[]; node_types: [string[]]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

function load(path: string): Snapshot {
  const raw = JSON.parse(readFileSync(path, 'utf8')) as RawSnapshot;
  const { node_fields: nf, edge_fields: ef, node_types, edge_types } = raw.snapshot.meta;
  const n = {
    width: nf.length,
    type: nf.indexOf('type'),
    name: nf.indexOf('name'),
    id: nf.indexOf('id'),
    size: nf.indexOf('self_size'),
    edges: nf.indexOf('edge_count'),
  };
  const e = { width: ef.length, type: ef.indexOf('type'), name: ef.indexOf('name_or_index'), to: ef.indexOf('to_node') };
  const count = raw.nodes.length / n.width;
  const firstEdge = new Uint32Array(count + 1);
  for (let i = 0, at = 0; i < count; i++) {
    firstEdge[i] = at;
    at += raw.nodes[i * n.width + n.edges]! * e.width;
    firstEdge[i + 1] = at;
  }
  return { nodes: raw.nodes, edges: raw.edges, strings: raw.strings, nodeTypes: node_types[0], edgeTypes: edge_types[0], n, e, count, firstEdge };
}

const field = (s: Snapshot, i: number, f: number) => s.nodes[i * s.n.width + f]!;

/** Strings and numbers by type only; everything else by type and (constructor) name. */
function keyOf(s: Snapshot, i: number): string {
  const type = s.nodeTypes[field(s, i, s.n.type)]!;
  if (type.endsWith('string') || type === 'number') return type;
  return `${type}:${s.strings[field(s, i, s.n.name)]!.slice(0, 80)}`;
}

const CODE_KEYS = /^(code|object shape):|^hidden:system \/ (WeakArrayList|CodeWrapper|BytecodeWrapper)$/;

/** Compiled code and what V8 keeps for it, as opposed to the program's data. */
const isCode = (key: string) => CODE_KEYS.test(key);

function add(groups: Map<string, Group>, key: string, bytes: number, node?: number): void {
  let g = groups.get(key);
  if (!g) groups.set(key, (g = { count: 0, bytes: 0, samples: [] }));
  g.count++;
  g.bytes += bytes;
  if (node !== undefined && g.samples.length < 3) g.samples.push(node);
}

function aggregate(s: Snapshot, isNew?: (i: number) => boolean): { all: Map<string, Group>; fresh: Map<string, Group> } {
  const all = new Map<string, Group>();
  const fresh = new Map<string, Group>();
  for (let i = 0; i < s.count; i++) {
    const key = keyOf(s, i);
    const bytes = field(s, i, s.n.size);
    add(all, key, bytes);
    if (isNew?.(i)) add(fresh, key, bytes, i);
  }
  return { all, fresh };
}

/** Strong retainers of every node (weak edges skipped). */
function retainersOf(s: Snapshot): Map<number, Array<[node: number, edge: number]>> {
  const out = new Map<number, Array<[number, number]>>();
  for (let i = 0; i < s.count; i++) {
    for (let at = s.firstEdge[i]!; at < s.firstEdge[i + 1]!; at += s.e.width) {
      if (s.edgeTypes[s.edges[at + s.e.type]!] === 'weak') continue;
      const to = s.edges[at + s.e.to]! / s.n.width;
      let list = out.get(to);
      if (!list) out.set(to, (list = []));
      list.push([i, at]);
    }
  }
  return out;
}

function edgeName(s: Snapshot, at: number): string {
  const type = s.edgeTypes[s.edges[at + s.e.type]!]!;
  const name = s.edges[at + s.e.name]!;
  if (type === 'element' || type === 'hidden') return `[${name}]`;
  return type === 'property' ? s.strings[name]! : `${type}:${s.strings[name]}`;
}

/** One retainer path from `node` up, preferring old retainers, at most `depth` steps. */
function retainerPath(s: Snapshot, retainers: Map<number, Array<[number, number]>>, isNew: Uint8Array, node: number, depth = 10): string[] {
  const seen = new Set([node]);
  const steps: string[] = [];
  for (let cur = node, d = 0; d < depth; d++) {
    const list = (retainers.get(cur) ?? []).filter(([r]) => !seen.has(r));
    const pick = list.find(([r]) => !isNew[r]) ?? list[0];
    if (!pick) break;
    const [r, at] = pick;
    seen.add(r);
    steps.push(`${edgeName(s, at)} <- ${keyOf(s, r)}${isNew[r] ? '' : ' (old)'}`);
    if (!isNew[r]) break;
    cur = r;
  }
  return steps;
}

/** Self sizes of a snapshot's nodes, in bytes: compiled code (and what V8 keeps for it) and data. */
export function heapSplit(path: string): { code: number; data: number } {
  const s = load(path);
  const out = { code: 0, data: 0 };
  for (let i = 0; i < s.count; i++) out[isCode(keyOf(s, i)) ? 'code' : 'data'] += field(s, i, s.n.size);
  return out;
}

const mb = (bytes: number) => `${bytes >= 0 ? '+' : ''}${(bytes / 1e6).toFixed(2)} MB`;

export async function main(): Promise<void> {
  const [pathA, pathB, rowsArg] = process.argv.slice(3);
  if (!pathA || !pathB) throw new Error('usage: npm run bench -- heap-diff A.heapsnapshot B.heapsnapshot [rows]');
  const rows = Number(rowsArg ?? 30);
  const a = load(pathA);
  const b = load(pathB);
  const idsA = new Set<number>();
  for (let i = 0; i < a.count; i++) idsA.add(field(a, i, a.n.id));
  const isNew = new Uint8Array(b.count);
  for (let i = 0; i < b.count; i++) isNew[i] = idsA.has(field(b, i, b.n.id)) ? 0 : 1;
  const before = aggregate(a).all;
  const { all: after, fresh } = aggregate(b, (i) => isNew[i] === 1);

  const growth = [...new Set([...before.keys(), ...after.keys()])].map((key) => ({
    key,
    count: (after.get(key)?.count ?? 0) - (before.get(key)?.count ?? 0),
    bytes: (after.get(key)?.bytes ?? 0) - (before.get(key)?.bytes ?? 0),
  }));
  const sum = (pick: (g: (typeof growth)[number]) => boolean) => growth.filter(pick).reduce((t, g) => t + g.bytes, 0);
  console.log(
    `${a.count} → ${b.count} nodes; growth ${mb(sum(() => true))}: compiled code ${mb(sum((g) => isCode(g.key)))}, data ${mb(sum((g) => !isCode(g.key)))}`,
  );
  for (const [title, pick] of [
    ['data', (k: string) => !isCode(k)],
    ['compiled code', isCode],
  ] as const) {
    console.log(`\ngrowth, ${title} (count, bytes):`);
    for (const g of growth
      .filter((x) => pick(x.key))
      .sort((x, y) => y.bytes - x.bytes)
      .slice(0, rows)) {
      console.log(`${String(g.count).padStart(8)} ${String(g.bytes).padStart(10)}  ${g.key}`);
    }
  }

  const retainers = retainersOf(b);
  console.log('\nnew objects still alive in B, data (count, bytes), with a path to an old retainer:');
  for (const [key, g] of [...fresh]
    .filter(([k]) => !isCode(k))
    .sort((x, y) => y[1].bytes - x[1].bytes)
    .slice(0, rows)) {
    console.log(`${String(g.count).padStart(8)} ${String(g.bytes).padStart(10)}  ${key}`);
    for (const step of retainerPath(b, retainers, isNew, g.samples.at(-1)!)) console.log(`             ${step}`);
  }
}
