import { fork } from 'node:child_process';
import { Agent, request } from 'node:http';
import { signedHeaders } from '../plugins/webhook/signature.js';
const child = fork('bench/zz-prof-server.ts', { execArgv: ['--import', 'tsx'], env: { ...process.env, NAME: 'x' }, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
const addr = await new Promise<string>((r) => child.stdout!.on('data', (d) => r(String(d).trim())));
const url = new URL(addr);
const agent = new Agent({ keepAlive: true, maxSockets: 32 });
const now = Math.floor(Date.now() / 1000);
async function run(path: string, N: number, tag: string) {
  const reqs = Array.from({ length: N }, (_, i) => { const body = Buffer.from(JSON.stringify({ id: `${tag}${i}`, conversation: `c${i % 1000}`, sender: { id: 'u', name: 'A' }, text: 'the quick brown fox jumps over a lazy dog while steering messages arrive during a long tool call '.repeat(3) })); return { body, headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...signedHeaders('bench-secret-0123456789abcdef', body, now) } }; });
  let next = 0; const t0 = performance.now();
  await Promise.all(Array.from({ length: 32 }, async () => { while (next < N) { const r = reqs[next++]!; await new Promise<number>((res, rej) => { const q = request({ agent, host: url.hostname, port: url.port, path, method: 'POST', headers: r.headers }, (x) => { x.resume(); x.on('end', () => res(x.statusCode!)); }); q.on('error', rej); q.end(r.body); }); } }));
  console.log(path, (N / (performance.now() - t0) * 1000).toFixed(0), 'req/s');
}
const ask = (m: string) => new Promise((r) => { child.once('message', r); child.send(m); });
await run('/webhooks/bench', 3000, 'w'); await run('/bench/bare', 3000, 'w');
for (const [path, name] of [['/bench/bare', 'bare'], ['/webhooks/bench', 'hook']] as const) {
  await ask('start'); await run(path, 20000, name); await ask('stop');
  (await import('node:fs')).renameSync('/tmp/prof/x.cpuprofile', `/tmp/prof/${name}.cpuprofile`);
}
agent.destroy(); child.kill();
