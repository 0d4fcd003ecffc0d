/**
 * Redis commands by what issued them, from `MONITOR`: each `EVALSHA` named by
 * its script (the SHA1 of every steerbot, plugin and BullMQ script as loaded,
 * includes resolved; an `EVAL` by the SHA1 of its text), the commands a script
 * runs (MONITOR's `lua` lines) counted with the script that ran them, a plain
 * command by its name and key (BullMQ's when the key is the queue's); then
 * each label given a stage of a message's way. MONITOR slows Redis: a window of
 * its own, never the timed one.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, type WriteStream } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { CORE_SCRIPT_DIR, resolveIncludes, SCRIPT_FILE_RE } from '../src/scripts/index.js';

/** Top-level calls of one label, and the commands run inside them (scripts only). */
export interface Tally {
  calls: number;
  inner: number;
  /** The commands run inside, by name (lower case). */
  innerByCommand: Map<string, number>;
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const sha1 = (text: string | Buffer) => createHash('sha1').update(text).digest('hex');

/**
 * Every script steerbot may run, by SHA1: the core's (`acquire`), the plugins'
 * (`webhook/callback-claim`) and BullMQ's (`bullmq moveToActive`). From the
 * sources and from dist/, which the bench's processes run: a script edited
 * since the last build has two SHAs, one name.
 */
export function scriptNames(): Map<string, string> {
  const names = new Map<string, string>();
  for (const root of [ROOT, join(ROOT, 'dist')]) {
    const core = join(root, 'src', 'scripts');
    for (const [file, name] of luaFiles(core)) names.set(sha1(resolveIncludes(readFileSync(join(core, file), 'utf8'), file, [core])), name);
    const plugins = join(root, 'plugins');
    for (const plugin of existsSync(plugins) ? readdirSync(plugins) : []) {
      const dir = join(plugins, plugin);
      for (const [file, name] of luaFiles(dir)) {
        names.set(sha1(resolveIncludes(readFileSync(join(dir, file), 'utf8'), file, [dir, CORE_SCRIPT_DIR])), `${plugin}/${name}`);
      }
    }
  }
  // BullMQ's compiled scripts (its ESM build has extensionless imports: the CommonJS one loads).
  const bullmq = createRequire(import.meta.url)(join(dirname(createRequire(import.meta.url).resolve('bullmq')), 'scripts', 'index.js'));
  for (const s of Object.values(bullmq as Record<string, { name: string; content: string }>)) names.set(sha1(s.content), `bullmq ${s.name}`);
  return names;
}

/** The script files of a folder: file name and verb. */
function luaFiles(dir: string): Array<[string, string]> {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((file) => {
    const m = SCRIPT_FILE_RE.exec(file);
    return m ? [[file, m[1]!] as [string, string]] : [];
  });
}

const SCRIPT_CALLS = new Set(['evalsha', 'evalsha_ro', 'eval', 'eval_ro']);

/** MONITOR's escapes (`\n`, `\\`, `\xHH` for every other byte; ioredis has undone `\"`) undone: the bytes sent. */
function unescapeMonitor(arg: string): Buffer {
  const escapes: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };
  const latin1 = arg.replace(/\\(x[0-9a-fA-F]{2}|.)/g, (_, e: string) =>
    e.length === 3 ? String.fromCharCode(Number.parseInt(e.slice(1), 16)) : (escapes[e] ?? e),
  );
  return Buffer.from(latin1, 'latin1');
}

/** Where a command's key is: the key without the deployment's prefix, a conversation's or chat's id left out (`{c}:state`). */
const keyShape = (key: string, prefix: string) => (key.startsWith(`${prefix}:`) ? key.slice(prefix.length + 1) : key).replace(/\{([a-z]+):[^}]*\}/, '{$1}');

/** Whose keys a MONITOR pass watches. */
export interface Deployment {
  /** steerbot's key prefix. */
  prefix: string;
  /** The BullMQ queue's key prefix. */
  bullPrefix: string;
}

/**
 * Starts MONITOR on `url` and tallies every command by label: a script's name
 * (`names`, else `evalsha <sha>`); `bullmq <command>` for a plain command on
 * the queue's keys; else the command and the shape of its key (`hget
 * {c}:state`). The bench's own INFO calls are left out. `dump`: every line as
 * MONITOR gives it. `stop()` returns the tally.
 */
export async function monitorCommands(
  url: string,
  names: Map<string, string>,
  deployment: Deployment,
  dump?: WriteStream,
): Promise<{ stop(): Promise<Map<string, Tally>> }> {
  const client = new Redis(url);
  const monitor = await client.monitor();
  const innerFirst = await probeOrder(url, monitor);
  const tally = new Map<string, Tally>();
  const count = (label: string, calls: number, inner: string[]) => {
    const t = tally.get(label) ?? { calls: 0, inner: 0, innerByCommand: new Map() };
    t.calls += calls;
    t.inner += inner.length;
    for (const c of inner) t.innerByCommand.set(c, (t.innerByCommand.get(c) ?? 0) + 1);
    tally.set(label, t);
  };
  const labelOf = (cmd: string, args: string[]) => {
    if (cmd.startsWith('evalsha')) return names.get(args[1]!) ?? `evalsha ${args[1]!.slice(0, 8)}`;
    if (SCRIPT_CALLS.has(cmd)) return names.get(sha1(unescapeMonitor(args[1]!))) ?? 'eval (unknown)';
    if (args[1]?.startsWith(deployment.bullPrefix)) return `bullmq ${cmd}`;
    return args[1] === undefined ? cmd : `${cmd} ${keyShape(args[1], deployment.prefix)}`;
  };
  /** The script whose `lua` lines come next (they follow their EVALSHA), or the `lua` lines not yet claimed (they precede it). */
  let current: string | undefined;
  let pending: string[] = [];
  monitor.on('monitor', (time: string, args: string[], source: string) => {
    dump?.write(`${time} [${source}] ${args.join(' ')}\n`);
    if (source === 'lua') {
      const inner = args[0]!.toLowerCase();
      if (innerFirst) pending.push(inner);
      else count(current ?? '(script unknown)', 0, [inner]);
      return;
    }
    const cmd = args[0]!.toLowerCase();
    if (cmd === 'info') return;
    const script = SCRIPT_CALLS.has(cmd);
    const label = labelOf(cmd, args);
    count(label, 1, innerFirst && script ? pending : []);
    if (innerFirst && !script && pending.length) count('(script unknown)', 0, pending);
    pending = [];
    current = script ? label : undefined;
  });
  return {
    stop: async () => {
      monitor.disconnect();
      client.disconnect();
      return tally;
    },
  };
}

/** Whether this Redis shows a script's own commands before its EVAL (7.2 and later log a command once it ran) or after. */
async function probeOrder(url: string, monitor: Redis): Promise<boolean> {
  const marker = `bench-probe-${process.pid}`;
  const order: string[] = [];
  const seen = new Promise<void>((resolve) => {
    const onLine = (_time: string, args: string[], source: string) => {
      if (!args.includes(marker)) return;
      order.push(source === 'lua' ? 'inner' : 'eval');
      if (order.length === 2) {
        monitor.off('monitor', onLine);
        resolve();
      }
    };
    monitor.on('monitor', onLine);
  });
  const client = new Redis(url);
  await client.eval(`return redis.call('exists', ARGV[1])`, 0, marker);
  client.disconnect();
  await seen;
  return order[0] === 'inner';
}

/** The stages of a message's way, in order; `background` is what no one message asked for. */
export const STAGES = ['ingest', 'pickup', 'prompt', 'record', 'delivery', 'finish', 'background'] as const;
export type Stage = (typeof STAGES)[number] | 'other';

const READS = 'get|mget|hget|hmget|hgetall|exists|lrange|xrange|xrevrange|zrange|zrangebyscore|zrevrange|zscore|smembers|ttl|pttl';

/** Labels by stage, the first match wins: steerbot's scripts by verb, BullMQ's by what they do for a job, plain commands by command and key. */
const STAGE_OF: Array<[RegExp, Stage]> = [
  [/^bullmq (add\w*Job|addLog)$/, 'ingest'],
  [/^bullmq (moveToActive|bzpopmin|extendLocks?)$/, 'pickup'],
  [/^bullmq moveToFinished$/, 'finish'],
  [/^bullmq /, 'background'],
  [/^(ingest|access-check|usage-admit|api-admit|hset \{i\}:conversations)$/, 'ingest'],
  [/^(acquire|lease-acquire|heartbeat)$/, 'pickup'],
  [new RegExp(`^(pull|(${READS}) \\{(c|people)\\}:.*)$`), 'prompt'],
  [/^(append|usage-add|state-set)$/, 'record'],
  [/^(outbox-.*|reply-store|send-record|send-result|webhook\/.*)$/, 'delivery'],
  [/^(finish|lock-release)$/, 'finish'],
  [/^(retain|purge|\w+ console:.*)$/, 'background'],
];

/** Where a label belongs (`other` when no rule says). */
export const stageOf = (label: string): Stage => STAGE_OF.find(([re]) => re.test(label))?.[1] ?? 'other';
