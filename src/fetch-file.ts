/**
 * Downloads one file with a size limit: what channels use to fetch an
 * attachment's bytes for a prompt (`ChannelOutbound.fetchAttachment`).
 */
import type { FetchedFile } from './channel.js';
import { ChannelApiError, InvalidInputError } from './errors.js';

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
 * GETs `url` and returns its bytes and content type.
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
