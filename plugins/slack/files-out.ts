/**
 * Files out on Slack, with the upload flow Slack asks apps to use:
 * `files.getUploadURLExternal` (a one-time upload URL and the file id), a
 * POST of the bytes to that URL, then `files.completeUploadExternal`, which
 * shares the file in the conversation's channel and thread with the caption
 * as its comment. The platform message id delivery records is the file id
 * (the message that shares it is made by Slack after the call).
 */
import type { WebClient } from '@slack/web-api';
import type { OutboundFile } from 'steerbot/channel';
import { ChannelApiError, retryAfterMs } from 'steerbot/plugin';
import { call } from './api.js';
import type { SlackTarget } from './conversation.js';
import { escapeText } from './mrkdwn.js';

/** Largest file Slack takes, in bytes (1 GB). */
export const SLACK_MAX_FILE_BYTES = 1024 * 1024 * 1024;

/** What a file upload needs. */
export interface SlackFileUpload {
  web: WebClient;
  /** The bot token, only to redact it from errors. */
  token: string;
  /** Fetch for the upload POST. Default: global fetch. */
  fetch?: typeof fetch;
}

/** Uploads `file` and shares it in `target`; returns the file id. Throws ChannelApiError (429: with `retryAfterMs`). */
export async function uploadFile(o: SlackFileUpload, target: SlackTarget, file: OutboundFile): Promise<{ messageId: string }> {
  const { web, token } = o;
  const got = await call('files.getUploadURLExternal', () => web.files.getUploadURLExternal({ filename: file.name, length: file.bytes.byteLength }), token);
  if (!got.upload_url || !got.file_id) throw new ChannelApiError('slack files.getUploadURLExternal gave no upload URL');
  await postBytes(o.fetch ?? fetch, got.upload_url, file);
  const destination = target.threadTs !== undefined ? { channel_id: target.channel, thread_ts: target.threadTs } : { channel_id: target.channel };
  await call(
    'files.completeUploadExternal',
    () =>
      web.files.completeUploadExternal({
        files: [{ id: got.file_id!, title: file.name }],
        ...destination,
        // The caption is plain text: escaped, so no markup in it pings anyone.
        ...(file.caption && { initial_comment: escapeText(file.caption) }),
      }),
    token,
  );
  return { messageId: got.file_id };
}

/** Longest upload of one file's bytes, in ms. */
const UPLOAD_TIMEOUT_MS = 120_000;

/** POSTs the bytes to the one-time upload URL; an error names the status only (the URL is a credential). */
async function postBytes(fetchFn: typeof fetch, url: string, file: OutboundFile): Promise<void> {
  let res: Response;
  try {
    // Bounded: a stalled upload fails (and delivery retries it) instead of holding the run's delivery.
    res = await fetchFn(url, { method: 'POST', headers: { 'content-type': file.mimeType }, body: file.bytes, signal: AbortSignal.timeout(UPLOAD_TIMEOUT_MS) });
  } catch (err) {
    throw new ChannelApiError(`slack file upload failed: ${(err as Error).message.replace(url, '<upload URL>')}`);
  }
  await res.arrayBuffer().catch(() => undefined);
  if (res.ok) return;
  // Absent, unreadable or 0: 1 s, never an immediate retry.
  throw new ChannelApiError(`slack file upload failed: HTTP ${res.status}`, {
    status: res.status,
    ...(res.status === 429 && { retryAfterMs: retryAfterMs(res.headers.get('retry-after')) || 1000 }),
  });
}
