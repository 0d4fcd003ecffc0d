/**
 * The tools of one run of the local agent, as the AI SDK gets them: the
 * configured tools plus the MCP servers' (those reachable now) plus
 * `read_artifact`, each call
 * - journaled (started / completed) so a takeover replays recorded results
 *   and does not run a non-idempotent call twice (runner/tools/journal.ts),
 * - bounded: a result over `maxResultChars` is stored as an artifact and the
 *   model gets a preview plus a reference it can page through,
 * - failing safely: the model sees a short envelope, the logs the details.
 */
import { asSchema, type ModelMessage, type Schema, type ToolSet, tool } from 'ai';
import { type Logger, pino } from 'pino';
import { allowEntry, int, StaleRunError } from 'steerbot/plugin';
import { activeContext, offersTool, type RunContext, type ToolCallClaim, type ToolCallRef, traceToolCall } from 'steerbot/runner';
import { z } from 'zod';
import type { McpManager } from './mcp.js';
import { type McpServerConfig, type McpServerSettings, McpToolError, mcpServersSchema, mcpToolName } from './mcp-config.js';
import { policyConversation, ToolPolicy, type ToolPolicySettings, toolPolicySchema } from './policy.js';
import { ToolFailure, toolErrorEnvelope } from './tool-errors.js';
import type { AgentTool } from './tools.js';

/** Default of `toolResultMaxChars`. */
export const DEFAULT_TOOL_RESULT_MAX_CHARS = 16_000;
/** Default of `artifactTtlSeconds`: a day. */
export const DEFAULT_ARTIFACT_TTL_SECONDS = 86_400;
/** Characters of a large result shown in the prompt. */
const PREVIEW_CHARS = 2000;
/** Largest artifact stored, in characters; beyond it the result is cut (and says so). */
const MAX_ARTIFACT_CHARS = 5_000_000;

/**
 * The AI SDK's schema of each tool input schema, kept while the input schema lives: the SDK converts a zod schema to
 * JSON Schema at every model call when handed the zod schema, and once when handed this wrapper (it keeps the result).
 */
const sdkSchemas = new WeakMap<object, Schema>();

function sdkSchema(inputSchema: unknown): unknown {
  if (typeof inputSchema !== 'object' || inputSchema === null) return inputSchema;
  let schema = sdkSchemas.get(inputSchema);
  if (!schema) sdkSchemas.set(inputSchema, (schema = asSchema(inputSchema as Parameters<typeof asSchema>[0])));
  return schema;
}

/** Tool settings of `agents.local-agent` (spread into its schema). Optional, so an unset one stays out of the effective configuration. */
export const toolSettingsShape = {
  mcpServers: mcpServersSchema.optional(),
  toolResultMaxChars: int(1000, 1_000_000)
    .optional()
    .describe(
      'A tool result longer than this (in characters, as JSON) is stored as an artifact in Redis; the model gets a preview and reads the rest with the built-in `read_artifact` tool. Default 16 000.',
    ),
  artifactTtlSeconds: int(60, 30 * 86_400)
    .optional()
    .describe(
      "How long a conversation's artifacts live after its last one was stored, in seconds; `/new` and purge delete them sooner. Default 86 400 (a day).",
    ),
  idempotentTools: z
    .array(z.string().min(1).max(128))
    .optional()
    .describe(
      'Tools (by the name the model sees, e.g. `crm__lookup`) that may run again after a runner died during their call; any other such call is reported to the model as of unknown outcome. `http_fetch`, `current_time`, `read_artifact` and MCP tools annotated read-only or idempotent are already. Default `[]`.',
    ),
  toolPolicy: toolPolicySchema.optional(),
  httpFetchAllow: z
    .array(allowEntry)
    .optional()
    .describe(
      'Hosts, IP addresses or CIDR ranges `http_fetch` may reach although they are not public (loopback, private, link-local and metadata addresses are refused otherwise). Default `[]`.',
    ),
};

/** Options of the toolbox. */
export interface ToolboxOptions {
  /** MCP servers by name (settings as in `agents.local-agent.mcpServers`). */
  mcpServers?: Record<string, McpServerSettings>;
  /** Largest tool result put in the prompt as is, in characters. Default 16 000. */
  maxResultChars?: number;
  /** Lifetime of artifacts after the conversation's last artifact write, in seconds. Default 86 400. */
  artifactTtlSeconds?: number;
  /** Names of tools that may run again after a takeover (besides those declaring `idempotent`). */
  idempotentTools?: string[];
  /** Logger for the MCP connections (runs log through their own). */
  logger?: Logger;
  /** After a failed MCP connection, the next attempt waits this long (doubling), in ms. Default 1000. */
  mcpRetryDelayMs?: number;
  /** Per tool allow / deny / require_approval (as `agents.local-agent.toolPolicy`). Default: all allowed, except MCP tools not annotated read-only (approval). */
  policy?: ToolPolicySettings;
}

const readArtifactInput = z.object({
  id: z.string().min(1).max(64).describe('The artifact id from a tool result.'),
  offset: z.number().int().min(0).default(0).describe('First character to read. Default 0.'),
  length: z.number().int().min(1).optional().describe('Characters to read. Default and maximum: one page.'),
});

/** The run-time tool set of the local agent. */
export class Toolbox {
  /**
   * The MCP connections (shared by every run of this plugin instance), when servers are configured. The MCP SDK
   * is imported only then.
   */
  private readonly mcp: Promise<McpManager> | undefined;
  private readonly maxChars: number;
  private readonly ttlSeconds: number;
  private readonly idempotent: Set<string>;
  /** Tool name prefixes (`<server>__`) of the MCP servers whose results are framed (not `trusted`). */
  private readonly framedPrefixes: string[];
  readonly policy: ToolPolicy;

  constructor(o: ToolboxOptions = {}) {
    const servers = mcpServersSchema.parse(o.mcpServers ?? {}) as Record<string, McpServerConfig>;
    this.mcp =
      Object.keys(servers).length > 0
        ? import('./mcp.js').then(
            ({ McpManager }) =>
              new McpManager(servers, { logger: o.logger ?? silent, ...(o.mcpRetryDelayMs !== undefined && { retryDelayMs: o.mcpRetryDelayMs }) }),
          )
        : undefined;
    this.maxChars = o.maxResultChars ?? DEFAULT_TOOL_RESULT_MAX_CHARS;
    this.ttlSeconds = o.artifactTtlSeconds ?? DEFAULT_ARTIFACT_TTL_SECONDS;
    this.idempotent = new Set(o.idempotentTools ?? []);
    this.framedPrefixes = Object.entries(servers)
      .filter(([, cfg]) => cfg.trusted !== true)
      .map(([name]) => mcpToolName(name, ''));
    this.policy = new ToolPolicy(o.policy);
  }

  /** Whether `set` offers a tool of an MCP server whose results reach the model framed as external content. */
  offersFramedMcp(set: ToolSet): boolean {
    return Object.keys(set).some((name) => this.framedPrefixes.some((p) => name.startsWith(p)));
  }

  /** Closes the MCP connections. */
  async close(): Promise<void> {
    await (await this.mcp)?.close();
  }

  /**
   * The AI SDK tool set of one run: `tools` and the reachable MCP servers'
   * tools; `read_artifact` joins once the conversation has an artifact (one
   * in the history, or one stored by this run: the set is the object the loop
   * passes to every step, so the next step offers it). Without artifacts the
   * request carries no tool it cannot use.
   */
  async toolSet(ctx: RunContext, tools: readonly AgentTool[]): Promise<ToolSet> {
    // A denied tool is not offered at all.
    // So is one the run's profile does not list.
    const all = [...tools, ...(this.mcp ? await (await this.mcp).tools(ctx.logger) : [])].filter(
      (t) =>
        offersTool(ctx.agent.profile?.tools, t.name) &&
        this.policy.mode(t.name, policyConversation(ctx.run), t.defaultMode, ctx.agent.profile?.toolPolicy) !== 'deny',
    );
    const set: ToolSet = {};
    // `tool.call` spans are children of the run (the context the set is built in), not of the model call streaming them.
    const parent = activeContext();
    const add = (t: AgentTool) => {
      if (set[t.name]) {
        ctx.logger.warn({ tool: t.name }, 'two tools share a name; the first is kept');
        return;
      }
      set[t.name] = tool({
        description: t.description,
        inputSchema: sdkSchema(t.inputSchema),
        execute: (input: unknown, opts: { toolCallId: string; abortSignal?: AbortSignal }) =>
          traceToolCall(t.name, parent, input, async (failed) => {
            const out = await this.call(ctx, t, input, opts.toolCallId, opts.abortSignal, offerReader);
            if (out.failed) failed();
            return out.value;
          }),
      } as unknown as Parameters<typeof tool>[0]) as ToolSet[string];
    };
    const offerReader = () => {
      if (ctx.features.artifacts && !set[READ_ARTIFACT]) add(this.readArtifactTool(ctx));
    };
    for (const t of all) add(t);
    if (hasArtifactReference(ctx.history)) offerReader();
    return set;
  }

  /** One call: claim it in the journal, run it (or replay it), bound its result, record it. Never throws. */
  private async call(
    ctx: RunContext,
    t: AgentTool,
    input: unknown,
    callId: string,
    signal: AbortSignal | undefined,
    onArtifact: () => void,
  ): Promise<{ value: unknown; failed: boolean }> {
    const ref: ToolCallRef = { callId, tool: t.name, input, idempotent: t.idempotent === true || this.idempotent.has(t.name) };
    const log = ctx.logger.child({ tool: t.name, toolCallId: callId });
    if (
      this.policy.mode(t.name, policyConversation(ctx.run), t.defaultMode, ctx.agent.profile?.toolPolicy) === 'require_approval' &&
      !ctx.features.toolCalls?.recorded?.(ref)
    ) {
      // Asked before anything is recorded as started: a takeover during the wait resumes the wait, it does not find a call of unknown outcome.
      const approval = await this.approve(ctx, log, t, input, callId, signal ?? ctx.stop.signal);
      if ('refused' in approval) return { value: approval.refused, failed: true };
      if (approval.id !== undefined) ref.approval = approval.id;
    }
    let claim: ToolCallClaim;
    try {
      claim = ctx.features.toolCalls ? await ctx.features.toolCalls.claim(ref) : { kind: 'run', idempotencyKey: `${ctx.run.id}:${callId}`, rerun: false };
    } catch (err) {
      // The run was lost (or Redis is down): not recorded as started, so not run.
      log.warn({ err }, 'tool call not recorded; not running it');
      return { value: toolErrorEnvelope(t.name, err instanceof StaleRunError ? new ToolFailure('aborted', 'the run was taken over') : err), failed: true };
    }
    if (claim.kind === 'replay') {
      log.info({ status: claim.status }, 'tool result replayed from an earlier attempt');
      if (isArtifactReference(claim.output)) onArtifact();
      return { value: claim.output, failed: claim.status === 'error' };
    }
    if (claim.kind === 'unknown') {
      log.warn('an earlier attempt started this call and died; not idempotent, so not run again');
      const message =
        'An earlier attempt started this call and was interrupted before its result was recorded; it was not run again (the tool is not idempotent). Check whether it took effect before retrying.';
      return { value: toolErrorEnvelope(t.name, new ToolFailure('outcome_unknown', message)), failed: true };
    }
    let value: unknown;
    let failed = false;
    const outcome = await runWithTimeout(
      (s) =>
        t.execute(input, {
          signal: s,
          call: {
            runId: ctx.run.id,
            conversationId: ctx.run.conversationId,
            callId,
            attempt: ctx.run.attempt,
            ...(ctx.record.fencingToken !== undefined && { fencingToken: ctx.record.fencingToken }),
            idempotencyKey: claim.idempotencyKey,
            rerun: claim.rerun,
          },
        }),
      t.timeoutMs ?? 30_000,
      signal ?? ctx.stop.signal,
    );
    if (outcome.ok) {
      value = await this.bound(ctx, log, outcome.value, t.name === READ_ARTIFACT);
      if (isArtifactReference(value)) onArtifact();
    } else {
      failed = true;
      log.warn({ err: outcome.error, timedOut: outcome.timedOut, aborted: outcome.aborted }, 'tool failed');
      value = toolErrorEnvelope(t.name, outcome.error, { timedOut: outcome.timedOut, aborted: outcome.aborted, passMessage: (e) => e instanceof McpToolError });
    }
    try {
      await ctx.features.toolCalls?.completed(ref, { status: failed ? 'error' : 'ok', output: value });
    } catch (err) {
      // The step that carries this result is recorded next (or the run is lost): the call is not lost either way.
      log.warn({ err }, 'tool result not recorded');
    }
    return { value, failed };
  }

  /** Asks for approval: the approval's id when approved, else the envelope the model gets (`refused`). */
  private async approve(
    ctx: RunContext,
    log: Logger,
    t: AgentTool,
    input: unknown,
    callId: string,
    signal: AbortSignal,
  ): Promise<{ id?: string } | { refused: unknown }> {
    const tool = t.name;
    const refuse = (category: 'denied' | 'approval_timeout' | 'aborted', message: string) => ({
      refused: toolErrorEnvelope(tool, new ToolFailure(category, message)),
    });
    if (!ctx.features.approvals) return refuse('denied', "this tool needs a person's approval, which this runner cannot ask for");
    let outcome: Awaited<ReturnType<NonNullable<RunContext['features']['approvals']>['request']>>;
    try {
      const request = {
        callId,
        tool,
        input,
        text: this.policy.approvalText(tool, input, { destructive: t.destructive === true }),
        approvers: this.policy.approvers,
        timeoutMs: this.policy.approvalTimeoutMs,
      };
      outcome = await ctx.features.approvals.request(request, signal);
    } catch (err) {
      log.warn({ err }, 'approval could not be asked');
      return refuse('denied', 'the approval could not be asked');
    }
    log.info({ decision: outcome.decision }, 'approval decided');
    switch (outcome.decision) {
      case 'approved':
        return outcome.id !== undefined ? { id: outcome.id } : {};
      case 'timeout':
        return refuse('approval_timeout', `nobody approved the call within ${Math.round(this.policy.approvalTimeoutMs / 1000)} s; it was not run`);
      case 'aborted':
        return refuse('aborted', 'the run was stopped while waiting for approval; the call was not run');
      default:
        return refuse('denied', `${outcome.by ? `${outcome.by} denied the call` : 'the call was denied'}; it was not run`);
    }
  }

  /** A result small enough for the prompt: as is, or a preview plus an artifact reference. */
  private async bound(ctx: RunContext, log: Logger, value: unknown, exempt: boolean): Promise<unknown> {
    const text = typeof value === 'string' ? value : (JSON.stringify(value ?? null) ?? 'null');
    if (exempt || text.length <= this.maxChars) return value ?? null;
    const stored = text.length > MAX_ARTIFACT_CHARS ? `${text.slice(0, MAX_ARTIFACT_CHARS)}…[cut at ${MAX_ARTIFACT_CHARS} characters]` : text;
    const preview = text.slice(0, Math.min(PREVIEW_CHARS, this.maxChars));
    if (ctx.features.artifacts) {
      try {
        const ref = await ctx.features.artifacts.put(stored, this.ttlSeconds);
        log.info({ artifact: ref.id, chars: ref.chars }, 'large tool result stored as an artifact');
        return {
          artifact: { id: ref.id, chars: ref.chars },
          preview,
          note: `The result has ${ref.chars} characters; this is its beginning. Call ${READ_ARTIFACT} with id "${ref.id}" and an offset to read the rest.`,
        };
      } catch (err) {
        log.warn({ err }, 'artifact not stored; the result is cut');
      }
    }
    return { truncated: true, chars: text.length, preview };
  }

  private readArtifactTool(ctx: RunContext): AgentTool<z.infer<typeof readArtifactInput>> {
    const page = Math.max(500, this.maxChars - 500);
    const store = ctx.features.artifacts!;
    return {
      name: READ_ARTIFACT,
      description: `Reads part of a stored large tool result (an artifact) by id, from a character offset, at most ${page} characters per call.`,
      inputSchema: readArtifactInput,
      idempotent: true,
      timeoutMs: 10_000,
      async execute({ id, offset, length }) {
        const got = await store.read(id, offset, Math.min(length ?? page, page));
        if (!got) throw new ToolFailure('not_found', `no artifact ${id} (it may have expired or the conversation was reset)`);
        const end = offset + got.text.length;
        return { id, offset, chars: got.chars, text: got.text, ...(end < got.chars && { nextOffset: end }) };
      },
    };
  }
}

/** Name of the built-in tool that pages through artifacts. */
export const READ_ARTIFACT = 'read_artifact';

/** A bounded result that points at an artifact (what `bound` returns for a large result). */
function isArtifactReference(v: unknown): boolean {
  return typeof v === 'object' && v !== null && typeof (v as { artifact?: { id?: unknown } }).artifact?.id === 'string';
}

/** True when a tool result in `history` references an artifact (tool-result outputs as the AI SDK records them). */
function hasArtifactReference(history: readonly ModelMessage[]): boolean {
  for (const m of history) {
    if (m.role !== 'tool') continue;
    for (const part of m.content) {
      if (part.type === 'tool-result' && part.output.type === 'json' && isArtifactReference(part.output.value)) return true;
    }
  }
  return false;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown; timedOut: boolean; aborted: boolean };

/** Runs `fn` with a time limit and the run's abort signal; never throws. */
async function runWithTimeout(fn: (signal: AbortSignal) => Promise<unknown>, timeoutMs: number, parent: AbortSignal): Promise<Outcome> {
  const ac = new AbortController();
  const onAbort = () => ac.abort(parent.reason);
  parent.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  try {
    const value = await Promise.race([
      fn(ac.signal),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          timedOut = true;
          ac.abort('timeout');
          reject(new Error(`timed out after ${timeoutMs} ms`));
        }, timeoutMs);
      }),
      new Promise<never>((_, reject) => {
        if (parent.aborted) reject(new Error('aborted'));
        ac.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      }),
    ]);
    return { ok: true, value };
  } catch (error) {
    return { ok: false, error, timedOut, aborted: !timedOut && parent.aborted };
  } finally {
    clearTimeout(timer);
    parent.removeEventListener('abort', onAbort);
  }
}

const silent: Logger = pino({ level: 'silent' });
