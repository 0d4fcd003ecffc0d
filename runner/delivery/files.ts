/**
 * Files a run sends (`DeliverySink.file`). A file goes through the outbox
 * like a text message: its delivery key is claimed before the upload and
 * acknowledged with the platform's message id after it, so a takeover that
 * re-runs the sending tool call finds the record and sends nothing. The
 * bytes are never stored in Redis: a re-run reads them again from where
 * they came from (the workspace or the URL). A channel that takes no files,
 * or not one this large, gets one text message under the same key instead:
 * a file is never dropped silently.
 */
import type { Logger } from 'pino';
import type { ChannelOutbound, OutboundFile } from '../../src/channel.js';
import type { FileDelivery } from '../plugin.js';
import type { RunOutbox } from './outbox.js';
import type { PlatformCalls } from './platform-calls.js';
import { refused } from './streaming-edits.js';

/** What a file send needs of its run's delivery. */
export interface FileSendDeps {
  conversationId: string;
  outbound: ChannelOutbound | undefined;
  outbox: RunOutbox;
  calls: PlatformCalls;
  logger: Logger;
  /** Sends `text` under `key` through the outbox (the sink's text path); resolves with its outcome. */
  sendText(key: string, text: string): Promise<'sent' | 'skipped' | 'recorded' | 'failed'>;
  /** Called once per file handed to the channel. */
  onSent(): void;
}

/** A limit in bytes for people: `25 MiB` when it is whole mebibytes, else `12 KB`, `3.4 MB`. Pure. */
function formatBytes(bytes: number): string {
  if (bytes > 0 && bytes % 1_048_576 === 0) return `${bytes / 1_048_576} MiB`;
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${Math.round(bytes / 1000)} KB`;
  return `${(bytes / 1_000_000).toFixed(1).replace(/\.0$/, '')} MB`;
}

/** The text sent instead of a file the channel cannot take. Pure. */
function fileNotSentText(file: OutboundFile, why: string): string {
  const caption = file.caption ? `\n${file.caption}` : '';
  return `[file ${file.name} could not be sent here: ${why}]${caption}`;
}

/** Why the channel cannot take `file`, or undefined when it can. */
function unsendable(out: ChannelOutbound | undefined, file: OutboundFile): FileDelivery | undefined {
  if (!out?.sendFile) return { outcome: 'unsupported' };
  const max = out.maxFileBytes ?? 0;
  if (file.bytes.byteLength > max) return { outcome: 'too-large', maxBytes: max };
  return undefined;
}

/** Sends `file` once under `key`; a file the channel cannot take becomes one text message under the same key. Never throws. */
export async function sendFileOnce(d: FileSendDeps, key: string, file: OutboundFile): Promise<FileDelivery> {
  const out = d.outbound;
  const cannot = unsendable(out, file);
  if (cannot) {
    const why =
      cannot.outcome === 'too-large' ? `it is larger than this channel's limit of ${formatBytes(cannot.maxBytes ?? 0)}` : 'this channel does not take files';
    const text = await d.sendText(key, fileNotSentText(file, why));
    return text === 'failed' ? { outcome: 'failed', error: 'the notice could not be sent either' } : cannot;
  }
  const claim = await d.outbox.claim(key, 'possibly-dispatched');
  if (!claim.claimed) {
    d.logger.info({ deliveryKey: key }, 'skipping a file already delivered by an earlier attempt');
    return { outcome: 'sent' };
  }
  try {
    const { messageId } = await d.calls.withRetry(key, () =>
      out!.sendFile!(d.conversationId, file, { deliveryKey: key, ...(claim.maybeSentSince !== undefined && { maybeSentSince: claim.maybeSentSince }) }),
    );
    await d.outbox.write(key, { status: 'acknowledged', messageId });
    d.onSent();
    return { outcome: 'sent' };
  } catch (err) {
    const error = (err as Error).message.slice(0, 200);
    if (refused(err)) await d.outbox.write(key, { status: 'not-dispatched', error });
    d.logger.error({ err, deliveryKey: key }, 'file delivery failed');
    return { outcome: 'failed', error };
  }
}
