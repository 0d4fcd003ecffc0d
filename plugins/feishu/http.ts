/**
 * The SDK's `HttpInstance` (its one seam for HTTP) on `fetch`: the SDK's
 * client and long-connection client call it for every request (the tenant
 * access token, `/callback/ws/endpoint`, the IM API). Its own axios instance
 * would throw axios errors whose config carries the token; this one throws
 * FeishuApiError with the status, the platform's code and the rate limit's
 * wait for a non-2xx answer (the SDK passes errors through unchanged), and
 * takes `deps.fetch`. An upload (the SDK's `multipart/form-data` requests:
 * an object of fields, the file a Buffer) is sent as `FormData`. A download
 * (`responseType: 'stream'`, a message's resource) answers its body as a
 * Node stream, unread: the caller reads it within its size limit. The
 * request's timeout covers the whole download.
 */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { HttpInstance, HttpRequestOptions } from '@larksuiteoapi/node-sdk';
import { feishuError, networkError } from './errors.js';

/** Options of `fetchHttpInstance`. */
export interface FetchHttpOptions {
  /** Secrets removed from error messages (the app secret). */
  secrets: string[];
  /** Timeout of one request when the SDK names none, in ms. */
  timeoutMs: number;
  /** Wait of a rate limit that names none, in ms. */
  rateLimitRetryMs: number;
  fetch?: typeof fetch;
}

/** The platform's `code` of an answer (0 when it names none). */
const codeOf = (body: unknown): number => {
  const code = typeof body === 'object' && body !== null ? (body as { code?: unknown }).code : undefined;
  return typeof code === 'number' ? code : 0;
};

type Serializer = (params: Record<string, unknown>) => string;

/** The request's URL with its query (`params`, serialized the SDK's way when it gives a serializer). */
function urlOf(opts: HttpRequestOptions<unknown>): string {
  const url = opts.url ?? '';
  const params = Object.fromEntries(Object.entries(opts.params ?? {}).filter(([, v]) => v !== undefined));
  if (Object.keys(params).length === 0) return url;
  const query =
    typeof opts.paramsSerializer === 'function'
      ? (opts.paramsSerializer as Serializer)(params)
      : new URLSearchParams(params as Record<string, string>).toString();
  return `${url}${url.includes('?') ? '&' : '?'}${query}`;
}

/** Whether the SDK asked for a multipart body (`Content-Type: multipart/form-data`, without a boundary: fetch adds it). */
const isMultipart = (headers: Record<string, string>): boolean =>
  Object.entries(headers).some(([k, v]) => k.toLowerCase() === 'content-type' && String(v).startsWith('multipart/form-data'));

/** The SDK's upload fields as a form: bytes as a file part named after `file_name` when there is one. */
function formOf(data: unknown): FormData {
  const fields = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    if (value instanceof Uint8Array) form.append(name, new Blob([new Uint8Array(value)]), typeof fields.file_name === 'string' ? fields.file_name : name);
    else form.append(name, String(value));
  }
  return form;
}

/** The request's headers and body as fetch takes them. */
function bodyOf(method: string, opts: HttpRequestOptions<unknown>): { headers: Record<string, string>; body?: string | FormData; multipart: boolean } {
  const given = (opts.headers ?? {}) as Record<string, string>;
  if (opts.data === undefined || method === 'GET' || method === 'HEAD') return { headers: given, multipart: false };
  if (isMultipart(given)) {
    const headers = Object.fromEntries(Object.entries(given).filter(([k]) => k.toLowerCase() !== 'content-type'));
    return { headers, body: formOf(opts.data), multipart: true };
  }
  return { headers: { 'content-type': 'application/json; charset=utf-8', ...given }, body: JSON.stringify(opts.data), multipart: false };
}

/** Builds the instance. */
export function fetchHttpInstance(o: FetchHttpOptions): HttpInstance {
  const doFetch = o.fetch ?? fetch;
  async function request<R>(opts: HttpRequestOptions<unknown>): Promise<R> {
    const method = (opts.method ?? 'GET').toUpperCase();
    const url = urlOf(opts);
    const what = `${method} ${new URL(url).pathname}`;
    const { headers, body: sent, multipart } = bodyOf(method, opts);
    let res: Response;
    try {
      res = await doFetch(url, {
        method,
        headers,
        ...(sent !== undefined && { body: sent }),
        signal: AbortSignal.timeout(opts.timeout ?? o.timeoutMs),
      });
    } catch (err) {
      throw networkError(what, err, o.secrets);
    }
    if (opts.responseType === 'stream' && res.ok && res.body) {
      const data = Readable.fromWeb(res.body as WebReadableStream<Uint8Array>);
      return (opts.$return_headers ? { data, headers: Object.fromEntries(res.headers) } : data) as R;
    }
    const text = await res.text().catch(() => '');
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      // Not JSON: the error below names the status.
    }
    // A 200 with a non-zero `code` is returned as it is: the SDK reads some (the long connection's endpoint), callers check the rest.
    // An upload is the exception: the SDK hands back only its `data`, so its code would be lost.
    if (!res.ok || (multipart && codeOf(body) !== 0)) throw feishuError(what, res.status, body, res.headers, o.secrets, o.rateLimitRetryMs);
    if (opts.$return_headers) return { data: body, headers: Object.fromEntries(res.headers) } as R;
    return body as R;
  }
  const withMethod =
    (method: string) =>
    <R>(url: string, opts: HttpRequestOptions<unknown> = {}) =>
      request<R>({ ...opts, url, method });
  const withData =
    (method: string) =>
    <R>(url: string, data?: unknown, opts: HttpRequestOptions<unknown> = {}) =>
      request<R>({ ...opts, url, method, data });
  return {
    request,
    get: withMethod('GET'),
    delete: withMethod('DELETE'),
    head: withMethod('HEAD'),
    options: withMethod('OPTIONS'),
    post: withData('POST'),
    put: withData('PUT'),
    patch: withData('PATCH'),
  } as HttpInstance;
}
