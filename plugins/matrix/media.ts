/**
 * Matrix media: `mxc://<server>/<media id>` URIs checked before anything is
 * fetched, authenticated downloads (`/_matrix/client/v1/media/download`)
 * with a size limit, and the homeserver's upload limit
 * (`/_matrix/client/v1/media/config`), asked in the background when it is
 * first needed and again after an hour.
 */
import { type Attachment, type FetchedFile, fetchFile, InvalidInputError, type Logger } from 'steerbot/plugin';
import { type MatrixClient, seg } from './client.js';

/**
 * An `mxc://` URI: a server name (a DNS name, an IPv4 address or a bracketed
 * IPv6 address, an optional port) and a media id of `[A-Za-z0-9_-]` (the
 * spec's grammar), so nothing in it can climb out of the download path.
 */
const MXC = /^mxc:\/\/((?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?)\/([A-Za-z0-9_-]{1,255})$/;

/** The server name and media id of an `mxc://` URI; undefined for one that does not follow the grammar. */
export function parseMxc(uri: string): { server: string; mediaId: string } | undefined {
  const m = uri.length <= 512 ? MXC.exec(uri) : null;
  return m ? { server: m[1]!, mediaId: m[2]! } : undefined;
}

/** How long a learned upload limit is used before it is asked again, in ms. */
const LIMIT_REFRESH_MS = 3_600_000;

/** The largest file the homeserver takes: its `m.upload.size` once known, `fallback` until then or when it names none. */
export class UploadLimit {
  private learned: number | undefined;
  private askedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly client: MatrixClient,
    private readonly fallback: number,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** The limit in bytes; asks the homeserver in the background when it was not asked within the hour. */
  bytes(): number {
    if (this.now() - this.askedAt >= LIMIT_REFRESH_MS) void this.refresh();
    return this.learned ?? this.fallback;
  }

  /** Asks the homeserver now; a failure keeps the limit known so far. Never throws. */
  async refresh(): Promise<void> {
    this.askedAt = this.now();
    try {
      this.learned = await this.client.uploadLimit();
    } catch (err) {
      this.logger.debug({ err }, 'matrix media config not read; keeping the upload limit known so far');
    }
  }
}

/**
 * Downloads an attachment by its `mxc://` URI, with the bot's token.
 * @throws InvalidInputError for a URI off the grammar (nothing is requested) or a file larger than `maxBytes`; ChannelApiError when the homeserver refuses.
 */
export async function downloadMedia(
  client: MatrixClient,
  attachment: Attachment,
  o: { maxBytes: number; signal?: AbortSignal; timeoutMs: number },
): Promise<FetchedFile> {
  const mxc = parseMxc(attachment.ref);
  if (!mxc) throw new InvalidInputError('not a Matrix media URI (mxc://<server>/<media id>)');
  if (attachment.size !== undefined && attachment.size > o.maxBytes)
    throw new InvalidInputError(`attachment is ${attachment.size} bytes, more than ${o.maxBytes}`);
  const timeout = AbortSignal.timeout(o.timeoutMs);
  const file = await fetchFile(`${client.homeserverUrl}/_matrix/client/v1/media/download/${seg(mxc.server)}/${mxc.mediaId}`, {
    maxBytes: o.maxBytes,
    signal: o.signal ? AbortSignal.any([o.signal, timeout]) : timeout,
    fetch: client.authedFetch(),
    label: `Matrix media ${attachment.ref}`,
  });
  return attachment.mime && !file.mediaType ? { ...file, mediaType: attachment.mime } : file;
}
