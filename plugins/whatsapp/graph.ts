/**
 * The few Graph API calls the channel makes, over `fetch` (the channel's
 * `ChannelDeps.fetch`, else the global one, which pools connections): no
 * well-kept SDK for the WhatsApp Cloud API exists, and these are four
 * requests — send a message, mark one read (with the typing indicator),
 * upload media (multipart), read a media object's metadata and download its bytes. Base URL and
 * version come from the settings, so tests point it at a local fake.
 */
import { type FetchedFile, fetchFile } from 'steerbot/plugin';
import { graphError, networkError } from './errors.js';

/** Options of a GraphClient. */
export interface GraphClientOptions {
  /** Graph API root without a trailing slash, e.g. `https://graph.facebook.com`. */
  baseUrl: string;
  /** Version path segment, e.g. `v23.0`. */
  version: string;
  accessToken: string;
  /** Timeout of one call, in ms. */
  timeoutMs: number;
  /** Wait of a rate limit that names no `Retry-After`, in ms. */
  rateLimitRetryMs: number;
  /** Default: the global fetch. */
  fetch?: typeof fetch;
}

/** What the media endpoint answers for a media id. */
export interface MediaInfo {
  url: string;
  mime_type?: string;
  file_size?: number;
}

/** A Graph API client for one access token. Every method throws WhatsAppApiError (429: `retryAfterMs`). */
export class GraphClient {
  constructor(private readonly o: GraphClientOptions) {}

  private get fetch(): typeof fetch {
    return this.o.fetch ?? fetch;
  }

  private url(path: string): string {
    return `${this.o.baseUrl}/${this.o.version}/${path}`;
  }

  private auth(): Record<string, string> {
    return { authorization: `Bearer ${this.o.accessToken}` };
  }

  /** POSTs JSON to `path` (below the version) and returns the parsed answer. */
  async post(what: string, path: string, body: unknown): Promise<Record<string, unknown>> {
    return this.call(what, path, { method: 'POST', headers: { ...this.auth(), 'content-type': 'application/json' }, body: JSON.stringify(body) });
  }

  /** POSTs a multipart form to `path` (below the version: a media upload) and returns the parsed answer. */
  async upload(what: string, path: string, form: FormData): Promise<Record<string, unknown>> {
    return this.call(what, path, { method: 'POST', headers: this.auth(), body: form });
  }

  /** GETs `path` (below the version) and returns the parsed answer. */
  async get(what: string, path: string): Promise<Record<string, unknown>> {
    return this.call(what, path, { method: 'GET', headers: this.auth() });
  }

  /** Downloads a media object's bytes from the URL the media endpoint gave (it takes the same bearer token). */
  download(info: MediaInfo, o: { maxBytes: number; signal?: AbortSignal; label: string }): Promise<FetchedFile> {
    const withAuth: typeof fetch = (input, init) => this.fetch(input, { ...init, headers: this.auth() });
    return fetchFile(info.url, { maxBytes: o.maxBytes, fetch: withAuth, label: o.label, ...(o.signal && { signal: o.signal }) });
  }

  private async call(what: string, path: string, init: RequestInit): Promise<Record<string, unknown>> {
    let res: Response;
    try {
      res = await this.fetch(this.url(path), { ...init, signal: AbortSignal.timeout(this.o.timeoutMs) });
    } catch (err) {
      throw networkError(what, err, this.o.accessToken);
    }
    const text = await res.text().catch(() => '');
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : {};
    } catch {
      body = undefined;
    }
    if (!res.ok) throw graphError(what, res.status, body, res.headers.get('retry-after'), this.o.accessToken, this.o.rateLimitRetryMs);
    if (typeof body !== 'object' || body === null) throw graphError(what, 502, undefined, null, this.o.accessToken, this.o.rateLimitRetryMs);
    return body as Record<string, unknown>;
  }
}
