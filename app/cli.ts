#!/usr/bin/env node
/**
 * The `steerbot` command:
 * - `steerbot start [--config file]` (the default): load the configuration,
 *   start the process, stop cleanly on SIGINT / SIGTERM;
 * - `steerbot check-config [--config file] [--migrate]`: validate and print the effective
 *   configuration with secrets redacted; with `--migrate`, print the config file
 *   rewritten without deprecated keys (docs/access.md#migration);
 * - `steerbot pair <code> [--config file]`: approve a pairing code (docs/access.md);
 * - `steerbot revoke-token <name> [--config file]`: revoke an API token (docs/send-and-wake.md);
 * - `steerbot skills list [--config file]`: what each profile sees of the local agent's skills (docs/agent.md#skills);
 * - `steerbot export --conversation <id> | --identity <id> [--out file] [--config file]`: write
 *   everything stored for a conversation or a person as one JSON document (docs/people.md#export).
 * Exit codes: 0 fine, 1 failed (or nothing stored to export), 2 bad configuration or usage.
 */
import { parseArgs } from 'node:util';
import { PinoPretty } from 'pino-pretty';
import { pendingWindows } from '../runner/context-window.js';
import { ConfigError } from '../src/errors.js';
import { createLogger, type Logger, pluginRedactPaths, secretValues } from '../src/logger.js';
import { loadConfig, type SteerbotConfig, secretSettingsOf } from './config.js';
import { configDeprecations, deprecationWarning, migrateConfigFile } from './config-migration.js';
import { type ExportTarget, exportFromCli } from './export.js';
import { pairFromCli } from './pair.js';
import { BUILTIN_PLUGINS } from './registry.js';
import { revokeTokenFromCli } from './revoke-token.js';
import { skillsListFromCli } from './skills.js';
import { type RunningApp, startApp } from './start.js';
import { nextSteps, redactConfig } from './summary.js';

const USAGE = `usage: steerbot [start | check-config | pair <code> | revoke-token <name> | skills list | export (--conversation <id> | --identity <id>)] [--config file]

  start          start the bot (default); settings from --config / STEERBOT_CONFIG and the environment
  check-config   validate the configuration and print it with secrets redacted
                 --migrate: print the config file with deprecated keys rewritten (secrets as written)
  pair <code>    approve a pairing code (channels with access policy pairing)
  revoke-token <name>  revoke the send-and-wake API token of that name (host.api.tokens)
  skills list    print the skills each profile (and the default) sees: name, description, folder
  export         write everything stored for a conversation (--conversation <id>) or a person
                 (--identity <identity or account id>) as one JSON document, to stdout or --out <file>
`;

function fail(message: string, code: number): never {
  process.stderr.write(message.endsWith('\n') ? message : `${message}\n`);
  process.exit(code);
}

const OPTIONS = {
  config: { type: 'string', short: 'c' },
  help: { type: 'boolean', short: 'h' },
  migrate: { type: 'boolean' },
  conversation: { type: 'string' },
  identity: { type: 'string' },
  out: { type: 'string', short: 'o' },
} as const;

type Parsed = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;

interface CommandLine {
  command: 'start' | 'check-config' | 'pair' | 'revoke-token' | 'skills' | 'export';
  args: string[];
  file: string | undefined;
  migrate: boolean;
  /** `export`: what, and where to (undefined: stdout). */
  target?: ExportTarget;
  out?: string | undefined;
}

/** `export`'s options: exactly one of --conversation and --identity; --out only with export. */
function exportOptions(parsed: Parsed, command: string, rest: string[]): Pick<CommandLine, 'target' | 'out'> {
  const { conversation, identity, out } = parsed.values;
  if (command !== 'export') {
    if (conversation !== undefined || identity !== undefined || out !== undefined)
      fail(`steerbot: --conversation, --identity and --out go with export\n${USAGE}`, 2);
    return {};
  }
  if (rest.length > 0) fail(`steerbot: export takes no arguments, only --conversation <id> or --identity <id>\n${USAGE}`, 2);
  if ((conversation === undefined) === (identity === undefined)) fail(`steerbot: export needs one of --conversation <id> and --identity <id>\n${USAGE}`, 2);
  if (out === '') fail(`steerbot: --out needs a file name\n${USAGE}`, 2);
  return { target: conversation !== undefined ? { conversation } : { identity: identity! }, out };
}

function parseCommandLine(): CommandLine {
  let parsed: Parsed;
  try {
    parsed = parseArgs({ options: OPTIONS, allowPositionals: true });
  } catch (err) {
    fail(`steerbot: ${(err as Error).message}\n${USAGE}`, 2);
  }
  if (parsed.values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const [command = 'start', ...rest] = parsed.positionals;
  const migrate = parsed.values.migrate === true;
  if (migrate && command !== 'check-config') fail(`steerbot: --migrate goes with check-config\n${USAGE}`, 2);
  const exporting = exportOptions(parsed, command, rest);
  if (command === 'export') return { command, args: [], file: parsed.values.config, migrate, ...exporting };
  if (command === 'pair') {
    if (rest.length !== 1) fail(`steerbot: pair takes one code\n${USAGE}`, 2);
    return { command, args: rest, file: parsed.values.config, migrate };
  }
  if (command === 'revoke-token') {
    if (rest.length !== 1) fail(`steerbot: revoke-token takes one token name\n${USAGE}`, 2);
    return { command, args: rest, file: parsed.values.config, migrate };
  }
  if (command === 'skills') {
    if (rest.length !== 1 || rest[0] !== 'list') fail(`steerbot: skills takes one subcommand: list\n${USAGE}`, 2);
    return { command, args: rest, file: parsed.values.config, migrate };
  }
  if ((command !== 'start' && command !== 'check-config') || rest.length > 0) fail(`steerbot: unknown command ${[command, ...rest].join(' ')}\n${USAGE}`, 2);
  return { command, args: [], file: parsed.values.config, migrate };
}

/** `check-config`: the effective configuration (secrets redacted), or with `--migrate` the file rewritten; old keys named on stderr. */
function checkConfig(config: SteerbotConfig, file: string | undefined, migrate: boolean): void {
  if (!migrate) {
    for (const d of configDeprecations(config)) process.stderr.write(`steerbot: warning: ${deprecationWarning(d)}\n`);
    for (const { path, model } of pendingWindows(config)) {
      process.stderr.write(
        `steerbot: ${path}: the context window of "${model.name}" is discovered when the runner starts (${model.baseURL}/models, else Ollama's /api/show); set ${path}.contextWindow to skip it\n`,
      );
    }
    process.stdout.write(`${JSON.stringify(redactConfig(config), null, 2)}\n`);
    return;
  }
  let migrated: ReturnType<typeof migrateConfigFile>;
  try {
    migrated = migrateConfigFile(file === undefined ? {} : { file });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    fail(`steerbot: ${err.message}`, 2);
  }
  for (const d of migrated.deprecations) process.stderr.write(`steerbot: rewrote ${d.oldKey} as ${d.newKey}${d.note ? ` (note: ${d.note})` : ''}\n`);
  process.stdout.write(migrated.text);
}

async function readConfig(file: string | undefined): Promise<SteerbotConfig> {
  try {
    return await loadConfig(file === undefined ? {} : { file });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    fail(`steerbot: ${err.message}`, 2);
  }
}

/** Pretty lines in a terminal, JSON lines otherwise (log collectors), unless `log.format` says. */
function makeLogger(config: SteerbotConfig): { logger: Logger; pretty: boolean } {
  const pretty = config.log.format === 'pretty' || (config.log.format === 'auto' && process.stdout.isTTY === true);
  const destination = pretty ? PinoPretty({ colorize: process.stdout.isTTY === true, sync: true, ignore: 'pid,hostname' }) : undefined;
  return {
    logger: createLogger({
      level: config.log.level,
      secrets: secretValues(config),
      redactPaths: pluginRedactPaths(BUILTIN_PLUGINS),
      secretPaths: secretSettingsOf(config),
      ...(destination && { destination }),
    }),
    pretty,
  };
}

async function start(config: SteerbotConfig): Promise<void> {
  const { logger, pretty } = makeLogger(config);
  // Through the logger, not Node's default printout: that would show an ioredis error's command arguments (a password).
  process.on('uncaughtException', (err) => {
    logger.fatal({ err }, 'uncaught exception');
    process.exit(1);
  });
  process.on('unhandledRejection', (err) => {
    logger.fatal({ err }, 'unhandled promise rejection');
    process.exit(1);
  });
  let app: RunningApp;
  try {
    app = await startApp({ config, logger });
  } catch (err) {
    if (err instanceof ConfigError) fail(`steerbot: ${err.message}`, 2);
    logger.fatal({ err }, 'steerbot failed to start');
    process.exit(1);
  }
  const steps = nextSteps(config, {
    address: app.address,
    channels: app.channels,
    runner: config.runner.enabled ? config.runner.plugin : undefined,
  });
  if (pretty) process.stdout.write(`\n${steps.join('\n')}\n\n`);
  else logger.info({ steps }, 'next steps');

  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    app.stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

/** `export`: the document on stdout or in the file, what happened on stderr. A failure part-way is said, never shown as a stack (an ioredis error's arguments may hold a password). */
async function exportCommand(config: SteerbotConfig, target: ExportTarget, out: string | undefined): Promise<never> {
  try {
    const r = await exportFromCli(config, target, out);
    process.stderr.write(`${r.line}\n`);
    process.exit(r.code);
  } catch (err) {
    fail(`steerbot: export failed: ${(err as Error).message}`, 1);
  }
}

const { command, args, file, migrate, target, out } = parseCommandLine();
const config = await readConfig(file);
if (command === 'check-config') checkConfig(config, file, migrate);
else if (command === 'export') await exportCommand(config, target!, out);
else if (command === 'pair') {
  const r = await pairFromCli(config, args[0]!);
  process.stdout.write(`${r.line}\n`);
  process.exit(r.ok ? 0 : 1);
} else if (command === 'skills') {
  try {
    process.stdout.write(await skillsListFromCli(config));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    fail(`steerbot: ${err.message}`, 2);
  }
} else if (command === 'revoke-token') {
  const r = await revokeTokenFromCli(config, args[0]!);
  process.stdout.write(`${r.line}\n`);
  process.exit(r.ok ? 0 : 1);
} else await start(config);
