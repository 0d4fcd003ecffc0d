/**
 * A local OTLP/HTTP trace sink for benchmarks, run as its own process (as a
 * collector would be): accepts `POST /v1/traces`, counts the spans it got
 * (`GET /count`), keeps nothing. `startTraceSink()` spawns it.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

const SPAN_ID = Buffer.from('"spanId":');

/** Counts `"spanId":` in a JSON export (ingest spans carry no links, so one per span). */
function countSpans(body: Buffer): number {
  let n = 0;
  for (let i = body.indexOf(SPAN_ID); i !== -1; i = body.indexOf(SPAN_ID, i + SPAN_ID.length)) n++;
  return n;
}

/** The sink, as seen from the benchmark. */
export interface TraceSink {
  /** `OTEL_EXPORTER_OTLP_ENDPOINT` for it. */
  endpoint: string;
  /** Spans received so far. */
  count(): Promise<number>;
  stop(): void;
}

/** Spawns the sink process and resolves once it listens. */
export async function startTraceSink(): Promise<TraceSink> {
  const proc = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TRACE_SINK: '1' },
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`trace sink exited (${code})`)));
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    count: async () => Number(await (await fetch(`${endpoint}/count`)).text()),
    stop: () => proc.kill('SIGKILL'),
  };
}

if (process.env.TRACE_SINK === '1') {
  let spans = 0;
  const server = createServer((req, res) => {
    if (req.method === 'GET') return void res.end(String(spans));
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      spans += countSpans(Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`));
}
