/**
 * The SDK's `HttpInstance` (its one seam for HTTP) on `fetch`: the SDK's
 * client and long-connection client call it for every request (the tenant
 * access token, `/callback/ws/endpoint`, the IM API). Its own axios instance
 * would throw axios errors whose config carries the token; this one throws
 * FeishuApiError with the status, the platform's code and the rate limit's
 * wait for a non-2xx answer (the SDK passes errors through unchanged), and
 * takes `deps.fetch`.
 */
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

/** Builds the instance. */
export function fetchHttpInstance(o: FetchHttpOptions): HttpInstance {
  const doFetch = o.fetch ?? fetch;
  async function request<R>(opts: HttpRequestOptions<unknown>): Promise<R> {
    const method = (opts.method ?? 'GET').toUpperCase();
    const url = urlOf(opts);
    const what = `${method} ${new URL(url).pathname}`;
    const hasBody = opts.data !== undefined && method !== 'GET' && method !== 'HEAD';
    let res: Response;
    try {
      res = await doFetch(url, {
        method,
        headers: { ...(hasBody && { 'content-type': 'application/json; charset=utf-8' }), ...(opts.headers as Record<string, string>) },
        ...(hasBody && { body: JSON.stringify(opts.data) }),
        signal: AbortSignal.timeout(opts.timeout ?? o.timeoutMs),
      });
    } catch (err) {
      throw networkError(what, err, o.secrets);
    }
    const text = await res.text().catch(() => '');
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      // Not JSON: the error below names the status.
    }
    // A 200 with a non-zero `code` is returned as it is: the SDK reads some (the long connection's endpoint), callers check the rest.
    if (!res.ok) throw feishuError(what, res.status, body, res.headers, o.secrets, o.rateLimitRetryMs);
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
