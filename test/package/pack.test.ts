/**
 * The published package, as a user gets it: `npm pack` of the package built
 * as `prepack` builds it (built once for the lane, test/helpers/built-package.ts), install the tarball into a fresh project, and run a
 * runner plugin written there against the real Redis, through the public
 * entry points only: the plugin is examples/echo-agent (it imports only
 * `steerbot/runner`), the process is a script that imports `steerbot`
 * (`loadConfig`, `startApp`), the channel is a webhook whose replies go to a
 * local callback receiver. The `steerbot` bin validates the same config, and
 * the runner plugin contract from `steerbot/testing` runs on the plugin in the
 * project's own vitest. A copy of the built-in webhook channel plugin (its
 * TypeScript and every other file of its folder) builds there with `tsc`
 * against the installed package, importing only `steerbot/*`, and passes the
 * channel plugin contract.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedHeaders } from '../../plugins/webhook/signature.js';
import { bullPrefixFor } from '../../src/protocol/run-queue.js';
import { type CallbackServer, startCallbackServer } from '../../testing/fakes/webhook-callback-server.js';
import { BUILD_WAIT_MS, builtPackage, COMPILED, packageBuilt } from '../helpers/built-package.js';
import { cleanupPrefix, redisUrl, testPrefix } from '../helpers/redis.js';

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const SECRET = 'whsec-pack-test-0123456789';
/** Installing takes most of the time; it happens once per file. */
const SETUP_TIMEOUT_MS = 180_000;

let work: string;
let project: string;
let tarball: string;
let callbacks: CallbackServer;
let redis: Redis;
let prefix: string;
let child: ChildProcess | undefined;
let output = '';

/** Runs npm; on failure the error names the command and carries its output. */
async function npm(args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await run('npm', args, { cwd, maxBuffer: 32 * 1024 * 1024, env: { ...process.env, npm_config_update_notifier: 'false' } });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

/** Starts `node start.js` in the project; resolves with the address it prints once it listens. */
function startProject(env: Record<string, string>): Promise<string> {
  const proc = spawn(process.execPath, ['start.js'], { cwd: project, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child = proc;
  proc.stderr!.on('data', (d: Buffer) => void (output += d.toString()));
  return new Promise((resolveAddress, reject) => {
    const lines = createInterface({ input: proc.stdout! });
    lines.on('line', (line) => {
      output += `${line}\n`;
      const m = /^listening (http:\/\/\S+)$/.exec(line);
      if (m) resolveAddress(m[1]!);
    });
    proc.once('exit', (code, signal) => reject(new Error(`start.js exited (${code ?? signal}) before listening:\n${output}`)));
  });
}

/** Sends SIGTERM to the started project; resolves with its exit code (undefined when none runs). */
async function stopProject(): Promise<number | null | undefined> {
  const proc = child;
  child = undefined;
  if (!proc) return undefined;
  if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  proc.kill('SIGTERM');
  return exited;
}

/** Links a package of ours into the project: one the author brings (vitest, typescript, @types/node), ours stands in. */
function linkFromRepo(name: string): void {
  const target = join(project, 'node_modules', name);
  if (existsSync(target)) return;
  mkdirSync(dirname(target), { recursive: true });
  symlinkSync(join(REPO, 'node_modules', name), target);
}

/** Runs the project's vitest on `files`; resolves with its verbose output, or fails with everything it printed. */
async function projectVitest(files: string[], what: string): Promise<string> {
  linkFromRepo('vitest');
  // A clean environment for the inner vitest: the outer one's worker variables would confuse it.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST')));
  const { stdout } = await run(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--reporter', 'verbose', ...files], {
    cwd: project,
    env: { ...env, REDIS_URL: redisUrl(), NO_COLOR: '1' },
  }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
    throw new Error(`${what} failed in the project: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
  });
  return stdout;
}

/**
 * Imports in the TypeScript files under `dir` that a plugin written outside this repository could not make:
 * a relative path that leaves the folder, or a `steerbot` entry point a plugin may not use.
 */
function importsLeaving(dir: string): string[] {
  const found: string[] = [];
  for (const f of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!f.isFile() || !f.name.endsWith('.ts')) continue;
    const file = join(f.parentPath, f.name);
    for (const m of readFileSync(file, 'utf8').matchAll(/\b(?:from|import)\s*\(?\s*'([^']+)'/g)) {
      const spec = m[1]!;
      const outside = spec.startsWith('.') && relative(dir, resolve(f.parentPath, spec)).startsWith('..');
      const internal = /^steerbot(\/|$)/.test(spec) && !/^steerbot\/(channel|plugin|runner)$/.test(spec);
      if (outside || internal) found.push(`${relative(dir, file)}: ${spec}`);
    }
  }
  return found;
}

/**
 * A lockfile for a project that depends on the tarball only: our lockfile's
 * production entries (with registry URLs, so `npm ci --offline` finds every
 * tarball in the cache `npm ci` filled, without the registry's metadata) plus
 * the tarball. The install then needs no network, and a dependency missing
 * from `dependencies` is missing there too.
 */
function projectLockfile(tgz: string, registry: string): { dependency: string; lock: unknown } {
  const repoLock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, Record<string, unknown>> };
  const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as Record<string, unknown>;
  const dependency = `file:${tgz}`;
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  const packages: Record<string, unknown> = {
    '': { name: 'pack-test-project', dependencies: { steerbot: dependency } },
    'node_modules/steerbot': {
      version: pkg.version,
      resolved: dependency,
      integrity,
      dependencies: pkg.dependencies,
      bin: pkg.bin,
      engines: pkg.engines,
      peerDependencies: pkg.peerDependencies,
      peerDependenciesMeta: pkg.peerDependenciesMeta,
    },
  };
  for (const [path, entry] of Object.entries(repoLock.packages)) {
    if (path === '' || entry.dev || entry.link) continue;
    const { devOptional, ...rest } = entry;
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const resolved = rest.resolved ?? `${registry}${name}/-/${name.split('/').pop()}-${String(rest.version)}.tgz`;
    packages[path] = { ...rest, resolved, ...(devOptional ? { optional: true } : {}) };
  }
  return { dependency, lock: { name: 'pack-test-project', lockfileVersion: 3, requires: true, packages } };
}

// The package built once for the lane; the wait has its own timeout.
beforeAll(packageBuilt, BUILD_WAIT_MS);

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'steerbot-pack-'));
  // Packed from a built snapshot of the sources, so a build elsewhere in the working tree (which empties dist/) cannot
  // race this one. It was built by the script `prepack` runs (checked below), so packing runs no script again.
  await npm(['pack', '--ignore-scripts', '--pack-destination', work, '--silent'], await builtPackage());
  const tgz = readdirSync(work).filter((f) => f.endsWith('.tgz'));
  expect(tgz).toHaveLength(1);
  tarball = join(work, tgz[0]!);

  project = join(work, 'project');
  mkdirSync(project);
  // Tarball URLs as the cache knows them: our lockfile names no URLs, so npm took them from the configured registry.
  const registry = (await npm(['config', 'get', 'registry'], REPO)).trim().replace(/\/?$/, '/');
  const { dependency, lock } = projectLockfile(tarball, registry);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'pack-test-project', private: true, type: 'module', dependencies: { steerbot: dependency } }, null, 2),
  );
  writeFileSync(join(project, 'package-lock.json'), JSON.stringify(lock, null, 2));
  // Install scripts are native speed-ups only (msgpackr); the user's install would run them.
  await npm(['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel', 'error'], project);

  copyFileSync(join(REPO, 'examples/echo-agent/index.js'), join(project, 'echo-agent.js'));
  writeFileSync(
    join(project, 'start.js'),
    [
      "import { loadConfig, startApp } from 'steerbot';",
      "const config = await loadConfig({ file: 'steerbot.json' });",
      '// Any free port (a config file cannot ask for port 0); the test reads the address from stdout.',
      'const app = await startApp({ config: { ...config, http: { ...config.http, port: 0 } } });',
      "process.stdout.write('listening ' + app.address + '\\n');",
      "process.once('SIGTERM', () => app.stop().then(() => process.exit(0)));",
      '',
    ].join('\n'),
  );
}, SETUP_TIMEOUT_MS);

afterAll(async () => {
  await stopProject();
  // The installed project is tens of thousands of files: removing them takes a while on a busy disk.
  if (work) await rm(work, { recursive: true, force: true });
}, SETUP_TIMEOUT_MS);

describe('the packed package', () => {
  it('is built by `npm pack` itself: `prepack` runs the build the tests pack from', () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.prepack).toBe('npm run build');
    expect(pkg.scripts.build).toBe('node scripts/build.mjs');
  });

  it('holds the compiled entry points and every asset (Lua scripts, browser scripts), and no sources, tests or benchmarks', async () => {
    const listing = await run('tar', ['-tzf', tarball]);
    const files = listing.stdout
      .split('\n')
      .filter(Boolean)
      .map((f) => f.replace(/^package\//, ''));
    for (const entry of [
      'dist/app/index.js',
      'dist/app/index.d.ts',
      'dist/app/cli.js',
      'dist/runner/index.js',
      'dist/runner/index.d.ts',
      'dist/src/channel.js',
      'dist/src/channel.d.ts',
      'dist/testing/index.js',
      'dist/testing/index.d.ts',
    ]) {
      expect(files).toContain(entry);
    }
    // Files modules read at run time, next to themselves: the build copies them to dist/.
    const assets = COMPILED.flatMap((dir) =>
      readdirSync(join(REPO, dir), { recursive: true, withFileTypes: true })
        .filter((f) => f.isFile() && !f.name.endsWith('.ts'))
        .map((f) => relative(REPO, join(f.parentPath, f.name))),
    );
    expect(assets).toContain('src/scripts/ingest-2n.lua');
    expect(files).toEqual(expect.arrayContaining(assets.map((a) => `dist/${a}`)));
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.filter((f) => /^(test|bench|examples)\//.test(f) || /\.test\.js$/.test(f))).toEqual([]);
  });

  describe('installed in a new project', () => {
    beforeAll(async () => {
      callbacks = await startCallbackServer(SECRET);
      redis = new Redis(redisUrl());
      prefix = testPrefix();
      const config = {
        http: { host: '127.0.0.1' },
        runner: { plugin: './echo-agent.js' },
        agents: { 'echo-agent': { prefix: 'packed: ' } },
        channels: { webhooks: { pack: { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 } } },
      };
      writeFileSync(join(project, 'steerbot.json'), JSON.stringify(config, null, 2));
    });
    afterAll(async () => {
      await stopProject();
      await callbacks?.close();
      if (redis) {
        await cleanupPrefix(redis, prefix);
        await cleanupPrefix(redis, bullPrefixFor(prefix));
        await redis.quit();
      }
    });

    it('validates the configuration with the plugin written there (steerbot check-config)', async () => {
      const { stdout } = await run(join(project, 'node_modules/.bin/steerbot'), ['check-config', '--config', 'steerbot.json'], {
        cwd: project,
        env: { ...process.env, REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix },
      });
      expect(stdout).toContain('echo-agent');
      expect(stdout).toContain('packed: ');
      expect(stdout).not.toContain(SECRET);
    });

    it("runs the runner plugin contract from steerbot/testing on the plugin, in the project's vitest", async () => {
      writeFileSync(
        join(project, 'echo-agent.test.js'),
        [
          "import { runnerPluginContract } from 'steerbot/testing';",
          "import echo from './echo-agent.js';",
          "runnerPluginContract({ name: 'echo-agent from the tarball', definition: echo, config: { prefix: 'packed: ' } });",
          '',
        ].join('\n'),
      );
      const stdout = await projectVitest(['echo-agent.test.js'], 'the runner contract suite');
      expect(stdout).toContain('runner plugin contract: echo-agent from the tarball');
      expect(stdout).toMatch(/Tests\s+8 passed \(8\)/);
    });

    it('builds a copy of the webhook channel plugin against the package (steerbot/* only) and passes the channel plugin contract there', async () => {
      const dir = join(project, 'webhook');
      // The whole folder: its TypeScript and any file it reads at run time (a Lua script of its own).
      cpSync(join(REPO, 'plugins/webhook'), dir, { recursive: true });
      expect(importsLeaving(dir)).toEqual([]);

      linkFromRepo('typescript');
      linkFromRepo('@types/node');
      const compilerOptions = {
        target: 'ES2023',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2023'],
        types: ['node'],
        strict: true,
        verbatimModuleSyntax: true,
        skipLibCheck: true,
        rootDir: '.',
        outDir: 'build',
      };
      writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['webhook'] }, null, 2));
      await run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json'], { cwd: project }).catch(
        (err: { stdout?: string; message: string }) => {
          throw new Error(`tsc failed on the copied webhook plugin: ${err.message}\n${err.stdout ?? ''}`);
        },
      );
      // What tsc does not emit goes next to the compiled modules, as the package's own build does.
      cpSync(dir, join(project, 'build/webhook'), { recursive: true, filter: (f) => !f.endsWith('.ts') });

      writeFileSync(
        join(project, 'webhook.test.js'),
        [
          "import { signatures } from 'steerbot/plugin';",
          "import { channelPluginContract, webhook } from 'steerbot/testing';",
          "import { createWebhookPlugin } from './build/webhook/index.js';",
          `const SECRET = ${JSON.stringify(SECRET)};`,
          'channelPluginContract({',
          "  name: 'webhook copied into the project',",
          '  makeHarness: async (env) => {',
          '    const callbacks = await webhook.startCallbackServer(SECRET);',
          '    const deps = { logger: env.logger, redis: env.redis, prefix: env.prefix };',
          "    const plugin = createWebhookPlugin('copy', { secret: SECRET, callbackUrl: callbacks.url, callbackRetryBaseMs: 10 }, deps);",
          '    return {',
          '      plugin,',
          '      async inject(m) {',
          '        const body = JSON.stringify({ id: m.updateId, conversation: m.chatId, sender: m.sender, text: m.text });',
          "        const headers = { 'content-type': 'application/json', ...signatures.signedHeaders(SECRET, body) };",
          "        const res = await fetch(env.baseUrl() + '/webhooks/copy', { method: 'POST', headers, body });",
          "        if (res.status >= 400 && res.status !== 403) throw new Error('webhook answered ' + res.status + ': ' + (await res.text()));",
          '      },',
          "      expected: (m) => ({ updateKey: 'webhook:copy:' + m.updateId, conversationId: 'webhook:copy:' + m.chatId }),",
          '      received: async (chatId) => callbacks.texts(chatId),',
          '      close: () => callbacks.close(),',
          '    };',
          '  },',
          '});',
          '',
        ].join('\n'),
      );
      const stdout = await projectVitest(['webhook.test.js'], 'the channel contract suite');
      expect(stdout).toContain('channel contract: webhook copied into the project');
      expect(stdout).toMatch(/Tests\s+6 passed \(6\)/);
    });

    it('answers a signed webhook message through the plugin, exactly once', async () => {
      const address = await startProject({ REDIS_URL: redisUrl(), STEERBOT_PREFIX: prefix, LOG_LEVEL: 'warn', LOG_FORMAT: 'json' });
      const post = async (id: string, text: string) => {
        const body = JSON.stringify({ id, conversation: 'c1', sender: { id: 'ann', name: 'Ann' }, text });
        const res = await fetch(`${address}/webhooks/pack`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...signedHeaders(SECRET, body) },
          body,
        });
        return { status: res.status, body: (await res.json()) as { result: string } };
      };

      expect(await post('m1', 'hello from the tarball')).toMatchObject({ status: 202, body: { result: 'new-run' } });
      // The same update again (a client retry) is a duplicate: no second turn, no second reply.
      expect(await post('m1', 'hello from the tarball')).toMatchObject({ status: 200, body: { result: 'duplicate' } });
      const [first] = await callbacks.waitForAccepted(1);
      expect(first!).toMatchObject({ signed: true, body: { conversation: 'c1', text: 'packed: hello from the tarball' } });

      // Replies of one conversation are called back in order: once the next one arrived, the first is settled.
      expect((await post('m2', 'and again')).status).toBe(202);
      await callbacks.waitForAccepted(2);
      expect(callbacks.texts('c1')).toEqual(['packed: hello from the tarball', 'packed: and again']);
      expect(await stopProject()).toBe(0); // SIGTERM: a clean shutdown
    });
  });
});
