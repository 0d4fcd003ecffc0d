/**
 * The built-in `send_file` tool: sends a file natively in the chat, from the
 * agent's workspace (a path confined to it: inside-folder.ts) or from a URL
 * (through the guarded fetch only: public addresses unless allow-listed,
 * after DNS and on every redirect), with an optional caption. The type comes
 * from the extension (a URL without one: its content type) and must match
 * the content (file-types.ts). Anything refused reaches the model as a clear
 * failure and nothing is sent.
 *
 * The file goes through the run's delivery under the call's idempotency key
 * (runner/delivery/files.ts): the tool is idempotent, because a re-run after
 * a takeover reads the bytes again and finds the outbox record of a file
 * already sent. The bytes are held in memory for the one send only.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import { basename } from 'node:path';
import { FetchRefusedError, guardedFetch, type ResolveHost, z } from 'steerbot/plugin';
import { type AgentTool, type FileDelivery, type RunContext, ToolFailure } from 'steerbot/runner';
import { extensionFor, extensionOf, SENDABLE_EXTENSIONS, sendableType } from './file-types.js';
import { errCode, insideFolder } from './inside-folder.js';

/** Default of `maxBytes`: 20 MiB. */
export const DEFAULT_SEND_FILE_MAX_BYTES = 20 * 1024 * 1024;

/** Options of the send_file tool. */
export interface SendFileToolOptions {
  /** The agent's workspace: `path` is read inside it. Default: none (only `url`, when `urls`). */
  workspace?: string | undefined;
  /** Whether `url` may be given (fetched through the guarded fetch). Default false. */
  urls?: boolean;
  /** Largest file sent, in bytes (also the most read from a URL). Default 20 971 520 (20 MiB). */
  maxBytes?: number;
  /** Hosts, IP addresses or CIDR ranges a URL may reach although they are not public. Default none. */
  allow?: readonly string[];
  /** Time limit of a URL fetch, in ms. Default 30000. */
  timeoutMs?: number;
  /** DNS resolution of URL hosts (tests). Default `node:dns`. */
  resolve?: ResolveHost;
}

const input = z.object({
  path: z.string().min(1).max(1024).optional().describe('A file in your workspace, relative to it, e.g. reports/summary.pdf.'),
  url: z.string().max(2048).optional().describe('Or a public http(s) URL to fetch the file from.'),
  caption: z.string().max(1000).optional().describe('Text shown with the file.'),
});

type SendFileInput = z.infer<typeof input>;

/** A file read and typed, ready to send. */
interface LoadedFile {
  name: string;
  mimeType: string;
  bytes: Uint8Array;
}

/** The send_file tool of one run; none when its delivery cannot send files or neither source is configured. */
export function sendFileTools(ctx: RunContext, o: SendFileToolOptions | undefined): AgentTool[] {
  const delivery = ctx.delivery;
  if (!o || !delivery.file || (o.workspace === undefined && !o.urls)) return [];
  const send = delivery.file.bind(delivery);
  const maxBytes = o.maxBytes ?? DEFAULT_SEND_FILE_MAX_BYTES;
  const sources = [o.workspace !== undefined && '`path` (a file in your workspace)', o.urls && '`url` (a public URL)'].filter(Boolean).join(' or ');
  const tool: AgentTool<SendFileInput> = {
    name: 'send_file',
    description: `Sends a file to the user in this chat, natively (images are shown as images). Give ${sources}, and optionally a caption. Types: ${SENDABLE_EXTENSIONS.join(', ')}; at most ${maxBytes} bytes.`,
    inputSchema: input,
    idempotent: true,
    timeoutMs: 120_000,
    async execute(args, { signal, call }) {
      const file = await load(args, o, maxBytes, signal);
      const key = call?.idempotencyKey ?? `f_${randomBytes(12).toString('hex')}`;
      const result = await send({ ...file, ...(args.caption && { caption: args.caption }) }, { key });
      return deliveryAnswer(file, result);
    },
  };
  return [tool];
}

/** Reads the file the call names, or throws a ToolFailure saying why not. */
async function load(args: SendFileInput, o: SendFileToolOptions, maxBytes: number, signal: AbortSignal): Promise<LoadedFile> {
  if ((args.path === undefined) === (args.url === undefined)) throw new ToolFailure('invalid_input', 'give exactly one of path and url');
  if (args.path !== undefined) {
    if (o.workspace === undefined) throw new ToolFailure('forbidden', 'refused: there is no workspace to send files from');
    return typed(basename(args.path), await readWorkspaceFile(o.workspace, args.path, maxBytes));
  }
  if (!o.urls) throw new ToolFailure('forbidden', 'refused: files cannot be sent from URLs here');
  return fetchFile(args.url!, o, maxBytes, signal);
}

/** The bytes of `path` inside `workspace`: a regular file, at most `maxBytes`, opened without following a final symlink. */
async function readWorkspaceFile(workspace: string, path: string, maxBytes: number): Promise<Uint8Array> {
  let folder: string;
  try {
    folder = await realpath(workspace);
  } catch (err) {
    throw new ToolFailure('unavailable', `the workspace cannot be read: ${errCode(err)}`);
  }
  const target = await insideFolder(folder, path, 'the workspace');
  if (typeof target !== 'string') throw new ToolFailure(target.error.startsWith('refused') ? 'forbidden' : 'not_found', target.error);
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(target, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    throw new ToolFailure('not_found', `cannot read ${path}: ${errCode(err)}`);
  }
  try {
    const s = await handle.stat();
    if (!s.isFile()) throw new ToolFailure('invalid_input', `${path} is not a file`);
    if (s.size > maxBytes) throw new ToolFailure('invalid_input', `refused: ${path} is ${s.size} bytes, more than the ${maxBytes} bytes a file may have`);
    return new Uint8Array(await handle.readFile());
  } finally {
    await handle.close();
  }
}

/** Fetches `url` through the guarded fetch; a refused URL, an error status or a body over `maxBytes` is a ToolFailure. */
async function fetchFile(url: string, o: SendFileToolOptions, maxBytes: number, signal: AbortSignal): Promise<LoadedFile> {
  if (!/^https?:\/\//i.test(url)) throw new ToolFailure('forbidden', 'refused: only http(s) URLs');
  let res: Awaited<ReturnType<typeof guardedFetch>>;
  try {
    res = await guardedFetch(url, {
      maxBytes,
      signal,
      timeoutMs: o.timeoutMs ?? 30_000,
      label: 'file URL',
      ...(o.allow && { allowPrivate: o.allow }),
      ...(o.resolve && { resolve: o.resolve }),
    });
  } catch (err) {
    if (err instanceof FetchRefusedError) throw new ToolFailure('forbidden', `refused: ${err.message}`);
    throw err;
  }
  if (res.status >= 400) throw new ToolFailure('unavailable', `the URL answered HTTP ${res.status}`);
  const contentType = res.headers['content-type'];
  return typed(urlFileName(res.url, typeof contentType === 'string' ? contentType : undefined), new Uint8Array(res.data));
}

/** The name of a fetched file: the last path segment, given the extension of its content type when it has no known one. */
function urlFileName(url: string, contentType: string | undefined): string {
  const segment = decodeURIComponent(new URL(url).pathname.split('/').pop() ?? '').replace(/[^\w.\- ]/g, '_') || 'file';
  const ext = extensionFor(contentType);
  return extensionOf(segment) === '' && ext ? `${segment}.${ext}` : segment;
}

/** `bytes` named `name` with their media type, or a ToolFailure when the type is not sendable. */
function typed(name: string, bytes: Uint8Array): LoadedFile {
  const type = sendableType(name, bytes);
  if ('error' in type) throw new ToolFailure('forbidden', type.error);
  return { name, mimeType: type.mimeType, bytes };
}

/** What the model hears of a file's delivery (send_file's, generate_image's). */
export function deliveryAnswer(file: LoadedFile, r: FileDelivery): unknown {
  const what = { name: file.name, type: file.mimeType, bytes: file.bytes.byteLength };
  if (r.outcome === 'sent') return { sent: what };
  if (r.outcome === 'failed') throw new ToolFailure('unavailable', `the file was not sent: ${r.error ?? 'the channel refused it'}`);
  const why = r.outcome === 'too-large' ? `it is larger than this chat's limit of ${r.maxBytes} bytes` : 'this chat does not take files';
  return { notSent: what, reason: why, told: 'the user was told in the chat that the file could not be sent here' };
}
