/**
 * `npm run bench -- <name>`: runs one benchmark. Each prints ratios measured
 * in one run (the machine is shared and noisy; absolute times drift).
 */
const BENCHES: Record<string, () => Promise<unknown>> = {
  ingest: () => import('./ingest.js').then((m) => m.main()),
  resume: () => import('./resume.js').then((m) => m.main()),
  steering: () => import('./steering.js').then((m) => m.main()),
  http: () => import('./http.js').then((m) => m.main()),
  recovery: () => import('./recovery.js').then((m) => m.main()),
  memory: () => import('./memory.js').then((m) => m.main()),
  'rate-limit': () => import('./rate-limit.js').then((m) => m.main()),
  cost: () => import('./cost.js').then((m) => m.main()),
  soak: () => import('./soak.js').then((m) => m.main()),
  'heap-diff': () => import('./heap-diff.js').then((m) => m.main()),
  e2e: () => import('./e2e.js').then((m) => m.main()),
  schedule: () => import('./schedule.js').then((m) => m.main()),
  scale: () => import('./scale.js').then((m) => m.main()),
  peer: () => import('./peer.js').then((m) => m.main()),
  'turn-files': () => import('./turn-files.js').then((m) => m.main()),
};

const name = process.argv[2];
const run = name ? BENCHES[name] : undefined;
if (!run) {
  console.error(`usage: npm run bench -- <${Object.keys(BENCHES).join('|')}>`);
  process.exit(2);
}
await run();
