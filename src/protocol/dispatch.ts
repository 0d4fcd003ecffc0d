/**
 * The host half of the protocol: ingest and the control commands. Each call
 * is one Lua script, one round trip (ingest's may share its call with the
 * other updates of the same event-loop turn), and writes nothing when its
 * input is bad.
 */
import { z } from 'zod';
import { MODEL_CHOICE_NAME } from '../config/defaults.js';
import { InvalidInputError } from '../errors.js';
import { attachmentSchema, inputOriginSchema, type Sender, senderSchema } from '../record/entries.js';
import { assertRunId, assertUpdateKey, controlChannel, conversationKeys } from '../redis/keys.js';
import { ScriptBatcher } from '../scripts/batch.js';
import { runScript, type ScriptReply } from '../scripts/index.js';
import { checkReply } from '../scripts/results.js';
import { newRunId } from './ids.js';
import { type ProtocolOptions, type RateLimitOptions, type ResolvedProtocolOptions, resolveOptions, type TokenBucketOptions } from './options.js';
import {
  type ConversationStatus,
  INPUT_POLICIES,
  type IncomingMessage,
  type IngestResult,
  type InputPolicy,
  type PurgedResult,
  type StopKind,
} from './types.js';

/** Largest `metadata` of a message, in bytes of JSON. */
export const MAX_METADATA_BYTES = 8192;

/** Who sent a control command, and which update carried it. */
export interface CommandSource {
  conversationId: string;
  updateKey: string;
  sender: Sender;
}

/** Result of a stop request. */
export type StopResult =
  | { kind: 'duplicate'; seq: number }
  | PurgedResult
  | { kind: 'idle'; seq: number }
  | { kind: 'requested'; seq: number; runId: string; stop: StopKind; runState: string };

/** Result of `/new`. */
export type ResetResult = { kind: 'duplicate'; seq: number } | PurgedResult | { kind: 'reset'; seq: number; stoppedRunId?: string };

/** Result of `/queue <mode>`. */
export type SetPolicyResult = { kind: 'duplicate'; seq: number } | PurgedResult | { kind: 'ok'; seq: number };
/** What `/model` did: the conversation's model choice after it (undefined: none, the default model). */
export type ModelChoiceResult = { kind: 'duplicate'; seq: number } | PurgedResult | { kind: 'ok'; seq: number; model: string | undefined };

/** Result of `/compact`: `requested` from the active run, or `new-run` (idle: the caller enqueues it). */
export type CompactionRequestResult =
  | { kind: 'duplicate'; seq: number }
  | PurgedResult
  | { kind: 'requested'; seq: number; runId: string }
  | { kind: 'new-run'; seq: number; runId: string };

/** Result of `/status`. */
export type StatusCommandResult = { kind: 'duplicate' } | PurgedResult | { kind: 'status'; status: ConversationStatus };

// A command script's `{ 'purged' }` reply (includes/dedupe.lua): nothing recorded, only the dedupe key set.
const purged = (): PurgedResult => ({ kind: 'purged', seq: 0 });

/** Ingest and control commands (host side). */
export class Dispatch {
  readonly options: ResolvedProtocolOptions;
  private readonly messageSchema: z.ZodType<IncomingMessage>;
  /** Updates ingested in one event-loop turn share one script call (group commit). */
  readonly ingestBatch: ScriptBatcher;
  /** The part of ingest's packed options argument that is the same for every update. */
  private readonly ingestOptionsMiddle: string;
  /** `|<user cap>,<user rate>,<conversation cap>,<conversation rate>,` before the sender id, or '' without limits (includes/rate-limit.lua). */
  private readonly rateLimitSpec: string;

  constructor(options: ProtocolOptions) {
    this.options = resolveOptions(options);
    this.ingestBatch = new ScriptBatcher(this.options.client, 'ingest');
    this.ingestOptionsMiddle = `|${this.options.steeringCapable ? '1' : '0'}|${this.options.steeringCap}|${this.options.dedupeTtlSeconds}|`;
    this.rateLimitSpec = rateLimitSpec(this.options.rateLimit);
    this.messageSchema = z.object({
      conversationId: z.string().min(1),
      updateKey: z.string().min(1),
      sender: senderSchema,
      text: z.string().max(this.options.maxMessageChars, `text is longer than ${this.options.maxMessageChars} characters`),
      messageId: z.string().max(128).optional(),
      replyTo: z.object({ messageId: z.string().max(128), text: z.string().max(this.options.maxMessageChars).optional() }).optional(),
      attachments: z.array(attachmentSchema).max(32).optional(),
      metadata: z.record(z.string(), z.unknown()).optional(),
      origin: inputOriginSchema.optional(),
      group: z.boolean().optional(),
    }) as z.ZodType<IncomingMessage>;
  }

  /**
   * Dedupes one update, appends it to the record and routes it by the
   * conversation's policy (its `/queue` override, else `policy`, else the
   * default). Throws InvalidInputError, writing nothing, on bad input.
   * `traceparent` is kept in the entry (the run answering it continues that trace).
   */
  async ingest(message: IncomingMessage, opts: { policy?: InputPolicy; runId?: string; traceparent?: string } = {}): Promise<IngestResult> {
    const parsed = this.messageSchema.safeParse(message);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new InvalidInputError(`bad message: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`);
    }
    const m = parsed.data;
    if (m.text.length === 0 && !m.attachments?.length) throw new InvalidInputError('bad message: text is empty and there are no attachments');
    assertUpdateKey(m.updateKey);
    // Generated ids are valid by construction; only a caller's id needs checking (ingest is the hot path).
    if (opts.runId !== undefined) assertRunId(opts.runId);
    const runId = opts.runId ?? newRunId();
    // Metadata and origin are serialized once: measured against their cap here, spliced into the entry below.
    const metadataJson = cappedJson('metadata', m.metadata);
    const originJson = cappedJson('origin', m.origin);
    const policy = opts.policy ?? this.options.defaultPolicy;
    if (!INPUT_POLICIES.includes(policy)) throw new InvalidInputError(`unknown policy ${String(policy)}`);
    const k = conversationKeys(this.options.prefix, m.conversationId);
    const entry = {
      v: 1,
      kind: 'message.received',
      at: this.options.now(),
      updateKey: m.updateKey,
      sender: m.sender,
      text: m.text,
      ...(m.messageId !== undefined && { messageId: m.messageId }),
      ...(m.replyTo !== undefined && { replyTo: m.replyTo }),
      ...(m.attachments !== undefined && { attachments: m.attachments }),
      // Kept so the runner can attribute each message to its sender and keep personal memory out of the group.
      ...(m.group === true && { group: true }),
      ...(opts.traceparent !== undefined && { trace: opts.traceparent }),
    };
    const json = originJson === undefined ? JSON.stringify(entry) : `${JSON.stringify(entry).slice(0, -1)},"origin":${originJson}}`;
    const entryJson = metadataJson === undefined ? json : `${json.slice(0, -1)},"metadata":${metadataJson}}`;
    const reply = checkReply(
      'ingest',
      await this.ingestBatch.run(
        [k.base, k.dedupe(m.updateKey)],
        // Rate limits are for chat users: an event, a fire or a heartbeat is never refused by them.
        [entryJson, `${policy}${this.ingestOptionsMiddle}${runId}${this.rateLimitSpec && m.origin === undefined ? `${this.rateLimitSpec}${m.sender.id}` : ''}`],
      ),
    );
    const [kind, seq, replyRunId, a, b] = reply;
    switch (kind) {
      case 'duplicate':
        return { kind, seq: Number(seq) };
      case 'new-run':
      case 'joined':
        return { kind, seq: Number(seq), runId: String(replyRunId) };
      case 'steered':
        return { kind, seq: Number(seq), runId: String(replyRunId), depth: Number(a) };
      case 'pending':
        return { kind, seq: Number(seq), runId: String(replyRunId), depth: Number(a), reason: b === 'overflow' || b === 'order' ? b : 'policy' };
      case 'interrupting':
        return { kind, seq: Number(seq), runId: String(replyRunId), stop: a as StopKind };
      case 'refused':
        // The reply's third element is the bucket, not a run id.
        return { kind, seq: Number(seq), limit: replyRunId === 'conversation' ? 'conversation' : 'user', retryAfterMs: Number(a) };
      case 'purged':
        return { kind, seq: 0 };
      default:
        throw new InvalidInputError(`ingest: unexpected reply ${JSON.stringify(reply)}`);
    }
  }

  /** Asks the active run to stop (`/stop`), be interrupted or superseded. Deduped by the command's update key. */
  async requestStop(source: CommandSource, kind: StopKind, command = kind === 'stop' ? '/stop' : `/${kind}`): Promise<StopResult> {
    const k = this.commandKeys(source);
    const entry = this.commandEntry(source, command);
    const reply = checkReply(
      'request-interrupt',
      await runScript(
        this.options.client,
        'request-interrupt',
        [k.base, k.dedupe(source.updateKey), k.active, k.log, k.meta],
        [kind, JSON.stringify(entry), this.options.dedupeTtlSeconds, controlChannel(this.options.prefix), source.conversationId],
      ),
    );
    if (reply[0] === 'duplicate') return { kind: 'duplicate', seq: Number(reply[1]) };
    if (reply[0] === 'purged') return purged();
    if (reply[0] === 'idle') return { kind: 'idle', seq: Number(reply[1]) };
    return { kind: 'requested', seq: Number(reply[1]), runId: String(reply[2]), stop: reply[3] as StopKind, runState: String(reply[4]) };
  }

  /** `/new`: history before this point is no longer projected; an active run is asked to stop. */
  async reset(source: CommandSource): Promise<ResetResult> {
    const k = this.commandKeys(source);
    const entry = { v: 1, kind: 'conversation.reset', at: this.options.now(), updateKey: source.updateKey, sender: source.sender };
    const reply = checkReply(
      'reset',
      await runScript(
        this.options.client,
        'reset',
        [k.base, k.dedupe(source.updateKey), k.active, k.log, k.meta],
        [JSON.stringify(entry), this.options.dedupeTtlSeconds, controlChannel(this.options.prefix), source.conversationId],
      ),
    );
    if (reply[0] === 'duplicate') return { kind: 'duplicate', seq: Number(reply[1]) };
    if (reply[0] === 'purged') return purged();
    return { kind: 'reset', seq: Number(reply[1]), ...(reply[2] ? { stoppedRunId: String(reply[2]) } : {}) };
  }

  /** `/queue <mode>`: sets the conversation's policy override (`undefined` clears it). */
  async setPolicy(source: CommandSource, policy: InputPolicy | undefined): Promise<SetPolicyResult> {
    if (policy !== undefined && !INPUT_POLICIES.includes(policy)) {
      throw new InvalidInputError(`unknown policy "${String(policy)}"; expected one of ${INPUT_POLICIES.join(', ')}`);
    }
    const k = this.commandKeys(source);
    const entry = this.commandEntry(source, '/queue', policy ?? 'default');
    const reply = checkReply(
      'set-policy',
      await runScript(
        this.options.client,
        'set-policy',
        [k.dedupe(source.updateKey), k.log, k.meta],
        [policy ?? '', JSON.stringify(entry), this.options.dedupeTtlSeconds],
      ),
    );
    if (reply[0] === 'purged') return purged();
    return { kind: reply[0] === 'duplicate' ? 'duplicate' : 'ok', seq: Number(reply[1]) };
  }

  /**
   * `/model`: shows (`name` absent, `op` show), sets or clears the
   * conversation's model choice. The caller checks the name against the
   * models the sender's profile allows; this checks only its shape.
   */
  async modelChoice(source: CommandSource, op: 'show' | 'set' | 'clear', name = ''): Promise<ModelChoiceResult> {
    if (op === 'set' && !MODEL_CHOICE_NAME.test(name)) throw new InvalidInputError(`bad model name "${name.slice(0, 64)}"`);
    const k = this.commandKeys(source);
    const entry = this.commandEntry(source, '/model', op === 'set' ? name : op);
    const reply = checkReply(
      'set-model',
      await runScript(
        this.options.client,
        'set-model',
        [k.dedupe(source.updateKey), k.log, k.meta],
        [op, name, JSON.stringify(entry), this.options.dedupeTtlSeconds],
      ),
    );
    if (reply[0] === 'purged') return purged();
    if (reply[0] === 'duplicate') return { kind: 'duplicate', seq: Number(reply[1]) };
    return { kind: 'ok', seq: Number(reply[1]), model: reply[2] ? String(reply[2]) : undefined };
  }

  /**
   * `/compact`: asks for a manual compaction. A running run applies it at its
   * next turn boundary; when idle, a compaction run is created (`new-run`:
   * the caller enqueues it).
   */
  async requestCompaction(source: CommandSource, opts: { runId?: string } = {}): Promise<CompactionRequestResult> {
    const k = this.commandKeys(source);
    const runId = opts.runId ?? newRunId();
    assertRunId(runId);
    const reply = checkReply(
      'request-compaction',
      await runScript(
        this.options.client,
        'request-compaction',
        [k.base, k.dedupe(source.updateKey), k.active, k.log, k.meta],
        [JSON.stringify(this.commandEntry(source, '/compact')), this.options.dedupeTtlSeconds, runId, source.conversationId],
      ),
    );
    if (reply[0] === 'duplicate') return { kind: 'duplicate', seq: Number(reply[1]) };
    if (reply[0] === 'purged') return purged();
    return { kind: reply[0] === 'new-run' ? 'new-run' : 'requested', seq: Number(reply[1]), runId: String(reply[2]) };
  }

  /** `/status`: the active run, steering depth, pending depth and policy, in one round trip. */
  /**
   * Claims an update that becomes no record entry (a command answered outside
   * the record, a refused message): sets its dedupe key with seq 0. False when
   * it was claimed or recorded before (a redelivery: answer nothing). Kept
   * `ttlSeconds`, at most (and by default) the dedupe window.
   */
  async claimUpdate(conversationId: string, updateKey: string, ttlSeconds?: number): Promise<boolean> {
    assertUpdateKey(updateKey);
    const key = conversationKeys(this.options.prefix, conversationId).dedupe(updateKey);
    const ttl = Math.min(ttlSeconds ?? this.options.dedupeTtlSeconds, this.options.dedupeTtlSeconds);
    return (await this.options.client.set(key, '0', 'EX', ttl, 'NX')) === 'OK';
  }

  /**
   * Keeps an update claimed for a shorter time (`claimUpdate` with `ttlSeconds`)
   * for the whole dedupe window from now, as if claimed with the default; a
   * claim that lapsed meanwhile is made again.
   */
  async keepClaim(conversationId: string, updateKey: string): Promise<void> {
    assertUpdateKey(updateKey);
    await this.options.client.set(conversationKeys(this.options.prefix, conversationId).dedupe(updateKey), '0', 'EX', this.options.dedupeTtlSeconds);
  }

  async status(conversationId: string): Promise<ConversationStatus> {
    const k = conversationKeys(this.options.prefix, conversationId);
    return statusOf(await runScript(this.options.client, 'status', [k.base, k.active, k.pending, k.meta], []));
  }

  /**
   * `/status`: the snapshot, `duplicate` when the command's update was seen
   * before (deduped in the same script), or `purged` while a refusing tombstone stands.
   */
  async statusCommand(source: CommandSource): Promise<StatusCommandResult> {
    const k = this.commandKeys(source);
    const r = await runScript(
      this.options.client,
      'status-command',
      [k.base, k.active, k.pending, k.meta, k.dedupe(source.updateKey)],
      [this.options.dedupeTtlSeconds],
    );
    if (r[0] === 'duplicate') return { kind: 'duplicate' };
    if (r[0] === 'purged') return purged();
    return { kind: 'status', status: statusOf(r.slice(1)) };
  }

  private commandKeys(source: CommandSource) {
    assertUpdateKey(source.updateKey);
    const sender = senderSchema.safeParse(source.sender);
    if (!sender.success) throw new InvalidInputError('bad command: sender.id is required');
    return conversationKeys(this.options.prefix, source.conversationId);
  }

  private commandEntry(source: CommandSource, command: string, args?: string) {
    return {
      v: 1,
      kind: 'command.received',
      at: this.options.now(),
      updateKey: source.updateKey,
      sender: source.sender,
      command,
      ...(args !== undefined && { args }),
    };
  }
}

/** `value` as JSON, undefined when absent. Throws InvalidInputError when it cannot be serialized or is over `MAX_METADATA_BYTES`. */
function cappedJson(name: 'metadata' | 'origin', value: object | undefined): string | undefined {
  if (value === undefined) return undefined;
  let json: string;
  try {
    json = JSON.stringify(value);
  } catch {
    throw new InvalidInputError(`bad message: ${name} is not JSON-serializable`);
  }
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_METADATA_BYTES) throw new InvalidInputError(`bad message: ${name} is ${bytes} bytes; the cap is ${MAX_METADATA_BYTES}`);
  return json;
}

/** The rate-limit part of ingest's options argument (without the sender id), '' when nothing limits. Throws InvalidInputError on a bad bucket. */
function rateLimitSpec(limits: RateLimitOptions | undefined): string {
  const part = (name: string, b: TokenBucketOptions | undefined): string => {
    if (b === undefined) return '0,0';
    if (!Number.isInteger(b.capacity) || b.capacity < 1 || !Number.isFinite(b.refillPerMinute) || b.refillPerMinute <= 0) {
      throw new InvalidInputError(`rateLimit.${name}: expected an integer capacity >= 1 and a refillPerMinute > 0`);
    }
    return `${b.capacity},${b.refillPerMinute}`;
  };
  if (!limits?.user && !limits?.conversation) return '';
  return `|${part('user', limits.user)},${part('conversation', limits.conversation)},`;
}

/** Maps the snapshot the status scripts return (includes/snapshot.lua). */
function statusOf(r: ScriptReply): ConversationStatus {
  const str = (v: unknown) => (v === '' || v === undefined || v === null ? undefined : String(v));
  return {
    activeRunId: str(r[0]),
    runState: str(r[1]) as ConversationStatus['runState'],
    stop: str(r[2]) as StopKind | undefined,
    steeringDepth: Number(r[3]),
    pendingDepth: Number(r[4]),
    policyOverride: str(r[5]) as InputPolicy | undefined,
    effectivePolicy: str(r[6]) as InputPolicy | undefined,
    lastSeq: Number(r[7]),
    resetSeq: Number(r[8]),
    attempt: Number(r[9]),
    owner: str(r[10]),
    leaseUntilMs: Number(r[11]),
    compactionRequestedSeq: Number(r[12] ?? 0),
    compactionBreaker: str(r[13]),
  };
}
