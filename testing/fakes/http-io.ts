/** The request body and JSON answer every fake server reads and writes. */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The request's whole body. */
export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** The request's whole body as UTF-8 text. */
export async function readText(req: IncomingMessage): Promise<string> {
  return (await readBody(req)).toString('utf8');
}

/** Answers `status` with `body` as JSON. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}
