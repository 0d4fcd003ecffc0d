/**
 * Downloads one file with a size limit: what channels use to fetch an
 * attachment's bytes for a prompt (`ChannelOutbound.fetchAttachment`).
 * `fetchFile` is for URLs a channel builds itself on its platform's own API
 * (Telegram's file endpoint), through the platform `fetch` (proxies);
 * `fetchUrlFile` is for URLs that arrive in a message, which only the guarded
 * fetch may follow.
 */
import { ChannelApiError, InvalidInputError } from '../errors.js';
import { type GuardedFetchOptions, guardedFetch } from './guarded-fetch.js';

/** An attachment's bytes, as fetched from the platform. */
export interface FetchedFile {
  data: Uint8Array;
  /** The platform's content type, when it says. */
  mediaType?: string;
}

/** Options of `fetchFile`. */
export interface FetchFileOptions {
  /** Largest body read, in bytes; past it InvalidInputError (the download is cut off). */
  maxBytes: number;
  signal?: AbortSignal;
  /** Default: global fetch. */
  fetch?: typeof fetch;
  /** Names the file in errors instead of the URL (a URL may carry a token). */
  label?: string;
}

/**
 * GETs `url`, a URL on the platform's own API, and returns its bytes and content type.
 * @throws InvalidInputError when the body is larger than `maxBytes`; ChannelApiError when the server does not answer 2xx.
 */
export async function fetchFile(url: string, o: FetchFileOptions): Promise<FetchedFile> {
  const label = o.label ?? 'file';
  const res = await (o.fetch ?? fetch)(url, { ...(o.signal && { signal: o.signal }) });
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw new ChannelApiError(`download of ${label} answered ${res.status}`, { status: res.status });
  }
  const tooLarge = (size: number) => new InvalidInputError(`${label} is ${size} bytes or more, more than ${o.maxBytes}`);
  const declared = Number(res.headers.get('content-length'));
  if (declared > o.maxBytes) {
    await res.body.cancel();
    throw tooLarge(declared);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    // The declared length may be missing or wrong: stop reading past the limit.
    if (size > o.maxBytes) {
      await reader.cancel();
      throw tooLarge(size);
    }
    chunks.push(value);
  }
  const type = res.headers.get('content-type');
  return { data: Buffer.concat(chunks), ...(type && { mediaType: type }) };
}

/**
 * GETs `url`, a URL that came in a message, through `guardedFetch` (every hop checked; over
 * `maxBytes` refused), and returns its bytes and content type.
 * @throws FetchRefusedError (an InvalidInputError) when a hop is not allowed or the body is too large; ChannelApiError when the last hop does not answer 2xx.
 */
export async function fetchUrlFile(url: string, o: Omit<GuardedFetchOptions, 'oversize'>): Promise<FetchedFile> {
  const res = await guardedFetch(url, { ...o, oversize: 'error' });
  if (res.status < 200 || res.status > 299) throw new ChannelApiError(`download of ${o.label ?? 'file'} answered ${res.status}`, { status: res.status });
  const type = res.headers['content-type'];
  return { data: res.data, ...(type && { mediaType: type }) };
}
