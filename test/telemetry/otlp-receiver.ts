/**
 * An in-test OTLP/HTTP trace receiver: a node:http server that accepts
 * `POST /v1/traces` in the JSON encoding (what `@opentelemetry/exporter-trace-otlp-http`
 * sends) and keeps every span, flattened, with its attributes decoded.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One received span. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId: string | undefined;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string; attributes: Record<string, unknown> }>;
  /** 2 = error. */
  statusCode: number;
  /** `service.name` of the process that exported it. */
  service: string;
}

/** A running receiver. */
export interface OtlpReceiver {
  /** Give it as `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter appends `/v1/traces`). */
  endpoint: string;
  spans: ReceivedSpan[];
  /** How many export requests arrived. */
  readonly requests: number;
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: AnyValue[] } };
type KeyValue = { key: string; value: AnyValue };

function decodeValue(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(decodeValue);
  return undefined;
}

const attrs = (list: KeyValue[] | undefined): Record<string, unknown> => Object.fromEntries((list ?? []).map((kv) => [kv.key, decodeValue(kv.value)]));

/** Ids are hex in the JSON encoding; base64 is accepted too (protobuf-JSON mapping). */
function id(v: string | undefined): string | undefined {
  if (!v) return undefined;
  if (/^[0-9a-f]+$/.test(v) && (v.length === 32 || v.length === 16)) return v;
  return Buffer.from(v, 'base64').toString('hex');
}

const ms = (nanos: string | number | undefined) => Number(BigInt(nanos ?? 0) / 1_000_000n);

/** Starts a receiver on 127.0.0.1 with a free port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  let requests = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('json')) {
        res.writeHead(415).end();
        return;
      }
      requests++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans?: any[] };
      for (const rs of body.resourceSpans ?? []) {
        const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '');
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: id(s.traceId)!,
              spanId: id(s.spanId)!,
              parentSpanId: id(s.parentSpanId),
              name: s.name,
              kind: s.kind,
              startMs: ms(s.startTimeUnixNano),
              endMs: ms(s.endTimeUnixNano),
              attributes: attrs(s.attributes),
              links: (s.links ?? []).map((l: any) => ({ traceId: id(l.traceId)!, spanId: id(l.spanId)!, attributes: attrs(l.attributes) })),
              statusCode: s.status?.code ?? 0,
              service,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    get requests() {
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
