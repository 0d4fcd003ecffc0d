/**
 * Attachments as the model sees them. The record keeps references only; when
 * a run builds its prompt, the user messages it answers (its inputs and the
 * steering it pulls) get their attachments' bytes as AI SDK image and file
 * parts, fetched through the conversation's channel (`fetchAttachment`) and
 * kept in a bounded in-memory cache so a file is fetched once per process.
 * The files of one prompt are fetched (and transcribed) concurrently, as
 * far as their shares of the prompt's bytes allow.
 * Earlier turns keep their text placeholders: the prompt prefix stays the
 * same from run to run, and old images are not paid for again.
 *
 * A file the model does not accept (by media type), one larger than the
 * limit, or one the channel cannot fetch gets the policy: `text` (the
 * placeholder naming the file stays), `omit` (the placeholder goes) or
 * `error` (the run ends telling the user the type is not supported).
 *
 * With a transcription model, voice notes and audio files become text
 * instead: transcribed once, the transcript kept in conversation state
 * (`local-agent.transcript.<hash>`) for every later prompt. A transcript
 * stands on one line in its placeholder's place, and the message is rendered
 * again by the projection, so it is framed and escaped exactly as the
 * message's text is: in a group, it cannot leave its sender's frame.
 *
 * What a stranger can send is bounded: a file goes to the model under the
 * type its bytes show (`contentTypeOf`: an image only as PNG, JPEG, GIF or
 * WebP, whatever its name or sender says, so no SVG or HTML goes as one);
 * the files of one prompt hold at most `maxTotalBytes` together, also while
 * they download (`PromptBytes`: each reserves what it may download before
 * its request, whatever size it declares); audio is transcribed only up to
 * `maxAudioSeconds` as its packets play (`audioSeconds`, not as its
 * container declares), and each transcription is charged to the run's
 * budgets (`RunRecord.spent`).
 */
import { createHash } from 'node:crypto';
import { type FilePart, type ImagePart, type ModelMessage, type TranscriptionModel, experimental_transcribe as transcribe } from 'ai';
import type { Logger } from 'pino';
import { type Attachment, type FetchedFile, InvalidInputError, type MessageReceived, type SeqEntry } from 'steerbot/plugin';
import { compaction, type RunContext, requestsReached, untrusted, userMessage } from 'steerbot/runner';
import { audioSeconds } from './audio-length.js';
import { contentTypeOf } from './file-types.js';
import { bytesInPrompt, PromptBytes } from './prompt-bytes.js';

/** What to do with an attachment the model cannot get. */
export type AttachmentPolicy = 'omit' | 'text' | 'error';

/** Attachment settings of the local agent. */
export interface AttachmentSettings {
  /** Largest file fetched, in bytes. Default 10 MiB. */
  maxBytes?: number;
  /**
   * Most bytes of files one prompt carries, the files of its earlier steered
   * messages included; a file past it gets the policy. Its downloads hold no
   * more at once either: each reserves what it may download (`maxBytes`, as far as it is free, whatever size was
   * declared) before its request, and is cut there. Default twice `maxBytes`.
   */
  maxTotalBytes?: number | undefined;
  /** Media types the model accepts (`image/*`, `application/pdf`). Default `['image/*']`. */
  accept?: string[];
  /** For a file not accepted, too large or not fetchable. Default `text`. */
  policy?: AttachmentPolicy;
  /** Bytes kept in the fetch cache (least recently used dropped first). Default 64 MiB. */
  cacheBytes?: number;
  /** Longest voice note or audio file transcribed, in seconds, as its packets play (counted before it is sent). Default 600. */
  maxAudioSeconds?: number;
}

/** State key prefix of transcripts (one key per audio file). */
export const TRANSCRIPT_KEY = 'local-agent.transcript';

/** Longest transcript kept, in characters. */
const MAX_TRANSCRIPT_CHARS = 20_000;

export const ATTACHMENT_DEFAULTS = {
  maxBytes: 10 * 1024 * 1024,
  accept: ['image/*'],
  policy: 'text',
  cacheBytes: 64 * 1024 * 1024,
  maxAudioSeconds: 600,
} as const;

/** Tokens a second of transcribed audio is charged to the budgets as (audio input tokens as OpenAI counts them: one per 100 ms). */
export const AUDIO_TOKENS_PER_SECOND = 10;

/** Text sent when the policy is `error` and a file cannot go to the model. */
export function unsupportedAttachmentMessage(a: Attachment, mediaType: string | undefined): string {
  const name = a.name === undefined ? '' : inert(a.name);
  const what = name ? `\`${name}\`` : `this ${a.kind}`;
  const type = mediaType === undefined ? '' : inert(mediaType);
  return `Sorry, I can't read ${what}${type ? ` (\`${type}\`)` : ''}: the model does not support that file type or size. Please send it as text or in another format.`;
}

/**
 * A sender's file name or type as the notice repeats it, inside a code span: one line of at most 100
 * characters without backticks, so no channel's formatting makes a link, a mention or markup of it.
 */
function inert(text: string): string {
  return untrusted.oneLine(text).replaceAll('`', "'").slice(0, 100).trim();
}

/** One attachment as the prompt gets it: a part, a transcript, or nothing (the policy applies). */
type Resolved = { kind: 'part'; part: ImagePart | FilePart } | { kind: 'transcript'; text: string } | { kind: 'none'; mediaType: string | undefined };

/** Expands attachments into model parts; one per plugin (the cache is shared by its runs). */
export class AttachmentParts {
  private readonly s: Required<AttachmentSettings> & { maxTotalBytes: number };
  private readonly cache = new Map<string, FetchedFile>();
  private cachedBytes = 0;
  /**
   * Fetches under way, per run (its abort signal) and cache key: a file a prompt names twice is fetched
   * once. Not shared between runs: a run that stops aborts its own fetches only.
   */
  private readonly inflight = new WeakMap<AbortSignal, Map<string, Promise<FetchedFile | undefined>>>();

  constructor(settings: AttachmentSettings = {}) {
    const maxBytes = settings.maxBytes ?? ATTACHMENT_DEFAULTS.maxBytes;
    this.s = { ...ATTACHMENT_DEFAULTS, accept: [...ATTACHMENT_DEFAULTS.accept], ...settings, maxTotalBytes: settings.maxTotalBytes ?? 2 * maxBytes };
  }

  /** Bytes the fetch cache holds now (the sum over its files; at most `cacheBytes`). */
  get cacheSize(): number {
    return this.cachedBytes;
  }

  /**
   * Replaces, in `messages`, the user message of each entry that has
   * attachments by one with image / file parts. Returns the notice to send
   * when the `error` policy applies (the messages are then left as they were).
   */
  async expand(
    ctx: RunContext,
    messages: ModelMessage[],
    entries: ReadonlyArray<SeqEntry<MessageReceived>>,
    transcriber?: TranscriptionModel,
  ): Promise<string | undefined> {
    // Every attachment's fetch (or transcription) of a message in the prompt starts at once, as far as its share of the
    // prompt's bytes is free (else it waits for those under way); the results are applied in order below.
    // Two messages with the same text are two user messages: each entry takes the newest one not taken yet.
    const taken = new Set<number>();
    const bytes = new PromptBytes(this.s.maxTotalBytes - bytesInPrompt(messages));
    const indexes = entries.map((m) => {
      const found = m.attachments?.length ? findUserMessage(messages, m, taken) : NOT_FOUND;
      taken.add(found.index);
      return found;
    });
    const work = entries.map((m, i) =>
      (indexes[i]!.index === -1 ? [] : (m.attachments ?? [])).map(async (a): Promise<Resolved> => {
        if (a.kind === 'audio' && transcriber) {
          const transcript = await this.transcript(ctx, a, transcriber, bytes);
          if (transcript !== undefined) return { kind: 'transcript', text: transcript };
        }
        return this.resolve(ctx, a, bytes);
      }),
    );
    const done = await Promise.all(work.map((w) => Promise.all(w)));
    for (const [i, m] of entries.entries()) {
      const found = indexes[i]!;
      if (found.index === -1 || !m.attachments) continue;
      const lines: AttachmentLine[] = [];
      const parts: Array<ImagePart | FilePart> = [];
      for (const [j, a] of m.attachments.entries()) {
        const got = done[i]![j]!;
        if (got.kind === 'none' && this.s.policy === 'error') return unsupportedAttachmentMessage(a, got.mediaType);
        if (got.kind === 'part') parts.push(got.part);
        lines.push(this.lineFor(got));
      }
      messages[found.index] = { role: 'user', content: [{ type: 'text', text: renderWith(m, found.senderNames, lines) }, ...parts] };
    }
    return undefined;
  }

  /** What stands in the message's text for a resolved attachment: a transcript on one line; nothing when omitted; else its placeholder. */
  private lineFor(got: Resolved): AttachmentLine {
    if (got.kind === 'transcript') return `[voice message, transcribed: ${untrusted.oneLine(got.text)}]`;
    return got.kind === 'none' && this.s.policy === 'omit' ? null : undefined;
  }

  private async resolve(ctx: RunContext, a: Attachment, bytes: PromptBytes): Promise<Resolved> {
    const guessed = a.mime ?? (a.kind === 'image' || a.kind === 'sticker' ? 'image/jpeg' : undefined);
    if (!guessed || !this.accepts(guessed) || (a.size !== undefined && a.size > this.s.maxBytes)) return { kind: 'none', mediaType: guessed };
    const share = await this.reserve(ctx, a, bytes);
    if (share === undefined) {
      ctx.logger.info({ kind: a.kind, maxTotalBytes: this.s.maxTotalBytes }, 'attachment not sent to the model: the prompt holds maxTotalBytes of files');
      return { kind: 'none', mediaType: guessed };
    }
    let held = share;
    let kept = 0;
    try {
      const file = await this.fetch(ctx, a, share);
      if (!file) return { kind: 'none', mediaType: guessed };
      if (!this.holds(ctx, a, file, held, bytes)) return { kind: 'none', mediaType: guessed };
      held = Math.max(held, file.data.byteLength);
      const told = file.mediaType?.split(';')[0]?.trim().toLowerCase();
      const declared = told && told !== 'application/octet-stream' ? told : guessed;
      const mediaType = partType(file.data, declared);
      if (!mediaType || !this.accepts(mediaType)) return { kind: 'none', mediaType: declared };
      kept = file.data.byteLength;
      const part: ImagePart | FilePart = mediaType.startsWith('image/')
        ? { type: 'image', image: file.data, mediaType }
        : { type: 'file', data: file.data, mediaType, ...(a.name && { filename: a.name }) };
      return { kind: 'part', part };
    } finally {
      bytes.release(held, kept);
    }
  }

  /**
   * Whether `file`, fetched with `share` held, fits: its share grown to its real size when that is larger and still
   * free (a file a prompt names twice is fetched once, within the first one's reservation).
   */
  private holds(ctx: RunContext, a: Attachment, file: FetchedFile, share: number, bytes: PromptBytes): boolean {
    if (file.data.byteLength <= share || bytes.grow(file.data.byteLength - share)) return true;
    ctx.logger.info({ kind: a.kind, maxTotalBytes: this.s.maxTotalBytes }, 'attachment not sent to the model: the prompt holds maxTotalBytes of files');
    return false;
  }

  /**
   * Reserves the bytes `a` may hold of its prompt's while it is fetched, its download's limit: a cached file's size;
   * else `maxBytes` as far as they are free (a declared size may understate the file), at least its declared size
   * (waiting for it). Undefined when that cannot be had.
   */
  private reserve(ctx: RunContext, a: Attachment, bytes: PromptBytes): Promise<number | undefined> {
    const cached = this.cache.get(cacheKey(ctx, a));
    if (cached) return bytes.take(cached.data.byteLength, cached.data.byteLength);
    return bytes.take(Math.min(Math.max(1, a.size ?? this.s.maxBytes), this.s.maxBytes), this.s.maxBytes);
  }

  /** `a`'s bytes, from the cache or fetched with at most `limit` bytes (its reservation); undefined when they cannot be had. */
  private async fetch(ctx: RunContext, a: Attachment, limit: number): Promise<FetchedFile | undefined> {
    const key = cacheKey(ctx, a);
    const hit = this.cache.get(key);
    if (hit) {
      // Most recently used goes last.
      this.cache.delete(key);
      this.cache.set(key, hit);
      return hit;
    }
    const fetchAttachment = ctx.features.fetchAttachment;
    if (!fetchAttachment) return undefined;
    let mine = this.inflight.get(ctx.stop.signal);
    if (!mine) this.inflight.set(ctx.stop.signal, (mine = new Map()));
    const pending = mine.get(key);
    if (pending) return pending;
    const get = () => fetchAttachment(a, { maxBytes: limit, signal: ctx.stop.signal });
    const fetching = this.fetchAndCache(get, a, key, ctx.logger).finally(() => mine.delete(key));
    mine.set(key, fetching);
    return fetching;
  }

  private async fetchAndCache(get: () => Promise<FetchedFile | undefined>, a: Attachment, key: string, logger: Logger): Promise<FetchedFile | undefined> {
    let file: FetchedFile | undefined;
    try {
      file = await get();
    } catch (err) {
      if (err instanceof InvalidInputError) logger.info({ kind: a.kind, err: err.message }, 'attachment not sent to the model');
      else logger.warn({ kind: a.kind, err }, 'attachment could not be fetched; the model gets its placeholder');
      return undefined;
    }
    if (!file) return undefined;
    if (file.data.byteLength <= this.s.cacheBytes) {
      // Two runs may fetch one file at once (in-flight fetches are per run): the second replaces the first's entry, not adds to it.
      const earlier = this.cache.get(key);
      if (earlier) {
        this.cache.delete(key);
        this.cachedBytes -= earlier.data.byteLength;
      }
      this.cache.set(key, file);
      this.cachedBytes += file.data.byteLength;
      for (const [k, f] of this.cache) {
        if (this.cachedBytes <= this.s.cacheBytes) break;
        this.cache.delete(k);
        this.cachedBytes -= f.data.byteLength;
      }
    }
    return file;
  }

  /**
   * The transcript of a voice note or audio file: from conversation state
   * when an earlier run made it (transcribed once), else transcribed now and
   * stored. Undefined when it cannot be fetched or transcribed (the policy applies).
   */
  private async transcript(ctx: RunContext, a: Attachment, model: TranscriptionModel, bytes: PromptBytes): Promise<string | undefined> {
    const key = `${TRANSCRIPT_KEY}.${createHash('sha256').update(cacheKey(ctx, a)).digest('hex').slice(0, 32)}`;
    const stored = await ctx.state.get(key);
    if (typeof stored === 'object' && stored !== null && typeof (stored as { text?: unknown }).text === 'string') return (stored as { text: string }).text;
    // The audio is held while it is transcribed, not kept in the prompt.
    const share = await this.reserve(ctx, a, bytes);
    if (share === undefined) return undefined;
    let held = share;
    try {
      const file = await this.fetch(ctx, a, share);
      if (!file || !this.holds(ctx, a, file, held, bytes)) return undefined;
      held = Math.max(held, file.data.byteLength);
      const text = await this.transcribe(ctx, file.data, model);
      if (text !== undefined) await ctx.state.set(key, { text, at: Date.now() });
      return text;
    } finally {
      bytes.release(held, 0);
    }
  }

  /**
   * Transcribes `audio` when it plays for at most `maxAudioSeconds` (its packets counted, not its container's
   * declared length), charging the run's budgets for that length or the provider's, the longer (and the call's
   * retries the provider may have billed, on a failure).
   */
  private async transcribe(ctx: RunContext, audio: Uint8Array, model: TranscriptionModel): Promise<string | undefined> {
    const seconds = await audioSeconds(audio, this.s.maxAudioSeconds);
    if (seconds === undefined || seconds > this.s.maxAudioSeconds) {
      ctx.logger.info({ seconds, maxAudioSeconds: this.s.maxAudioSeconds }, 'audio not transcribed: its length is unknown or over maxAudioSeconds');
      return undefined;
    }
    let result: Awaited<ReturnType<typeof transcribe>>;
    try {
      result = await transcribe({ model, audio, abortSignal: ctx.stop.signal, maxRetries: 1 });
    } catch (err) {
      const reached = requestsReached(err);
      if (reached > 0) await ctx.record.spent?.({ inputTokens: reached * audioTokens(seconds) });
      ctx.logger.warn({ err }, 'transcription failed; the model gets the placeholder');
      return undefined;
    }
    const text = result.text.trim().slice(0, MAX_TRANSCRIPT_CHARS);
    // The provider's own count of the audio, when it gives one and it is longer than the packets counted.
    const billed = Math.max(seconds, result.durationInSeconds ?? 0);
    await ctx.record.spent?.({ inputTokens: audioTokens(billed), outputTokens: compaction.estimateTokens(text) });
    return text;
  }

  private accepts(mediaType: string): boolean {
    return this.s.accept.some((p) => (p.endsWith('/*') ? mediaType.startsWith(p.slice(0, -1)) : mediaType === p));
  }
}

/** The cache key of `a`: a file is fetched once per conversation (a ref another conversation names is fetched again). */
const cacheKey = (ctx: RunContext, a: Attachment): string => `${ctx.run.conversationId}\n${a.ref}`;

/** Tokens `seconds` of audio are charged as. */
const audioTokens = (seconds: number): number => Math.ceil(seconds * AUDIO_TOKENS_PER_SECOND);

/**
 * The type a file goes to the model as: the one its bytes show (PNG, JPEG, GIF, WebP, PDF), whatever
 * was declared; else the declared type, unless it claims an image or a PDF its bytes are not (an SVG,
 * a page posing as a photo): undefined then. Pure.
 */
function partType(data: Uint8Array, declared: string): string | undefined {
  const shown = contentTypeOf(data);
  if (shown) return shown;
  return declared.startsWith('image/') || declared === 'application/pdf' ? undefined : declared;
}

/** Where `findUserMessage` found a message: its index (-1 when not found) and whether it was rendered with sender names. */
interface Found {
  index: number;
  senderNames: boolean;
}

const NOT_FOUND: Found = { index: -1, senderNames: false };

/** The newest user message rendered from `m` (with or without sender names) and not in `taken`. */
function findUserMessage(messages: ModelMessage[], m: MessageReceived, taken: ReadonlySet<number>): Found {
  const plain = userMessage(m, false).content;
  const named = userMessage(m, true).content;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (taken.has(i)) continue;
    const { role, content } = messages[i]!;
    if (role === 'user' && (content === plain || content === named)) return { index: i, senderNames: content !== plain };
  }
  return NOT_FOUND;
}

/** What stands in an attachment's place: a line of text, its placeholder (`undefined`), or nothing (`null`). */
type AttachmentLine = string | null | undefined;

/**
 * `m` as the projection renders it, each attachment's placeholder line
 * replaced as `lines` says. The lines become the message's own text and go
 * through the projection again, so they are framed and escaped exactly as
 * the text is: in a group, inside the sender's frame, where no transcript can
 * close it; in a one-to-one chat, as the person's own words.
 */
function renderWith(m: MessageReceived, senderNames: boolean, lines: readonly AttachmentLine[]): string {
  const body = m.text === '' ? [] : [m.text];
  for (const [j, a] of (m.attachments ?? []).entries()) {
    const line = lines[j] === undefined ? placeholder(a) : lines[j];
    if (line !== null) body.push(line);
  }
  return userMessage({ ...m, text: body.join('\n'), attachments: [] }, senderNames).content as string;
}

/** The placeholder line the projection writes for `a`, unframed and unescaped. */
function placeholder(a: Attachment): string {
  return userMessage({ v: 1, kind: 'message.received', at: 0, updateKey: '', sender: { id: '' }, text: '', attachments: [a] }, false).content as string;
}
