/**
 * The package built once for the tests that need compiled JavaScript: child
 * processes started from `dist/app/cli.js` (nothing compiled as they start)
 * and `npm pack`. What `npm pack` takes (package.json, the build script, docs,
 * the compiled folders) is copied to a directory of the temporary folder named
 * by a hash of those files, built there by scripts/build.mjs (what `prepack`
 * runs) and kept: another test process, or a later run with the same sources,
 * reuses it. The processes of a run build it at most once between them (a
 * lock directory); a build cut short leaves no directory behind.
 *
 * No vitest imports: the global setup starts the build too.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../', import.meta.url));

/** The folders the build compiles (tsconfig.build.json). */
export const COMPILED = ['src', 'host', 'runner', 'plugins', 'app', 'testing'];
/** What `npm pack` needs from the repository: the package's files and what builds them. */
export const PACKAGE_SOURCES = ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build.mjs', 'README.md', 'docs', ...COMPILED];

/**
 * Longest wait for the build, in ms (a loaded 2-core machine takes a minute or two): the timeout of the hook
 * `beforeAll(packageBuilt, BUILD_WAIT_MS)` a test file needing it starts with, so its own hooks keep theirs.
 */
export const BUILD_WAIT_MS = 600_000;
/** Builds of other sources older than this are removed after a build, in ms. */
const KEEP_MS = 3_600_000;
/** How long a failed build stands for the processes that wait for it, in ms. */
const FAILED_MS = 600_000;
const STEM = 'steerbot-test-build-';

/** Set by the global setup to `packageDir()`, for the test processes it forks: they need not hash the sources again. */
const DIR_ENV = 'STEERBOT_TEST_PACKAGE_DIR';

let built: Promise<string> | undefined;

/**
 * The directory holding the built package (`dist/`, the package's files, `node_modules` linked to the
 * repository's). Builds it unless this or another process did; `signal` stops a build this call started.
 */
export function builtPackage(signal?: AbortSignal): Promise<string> {
  built ??= packageDir().then((dir) => ensureBuilt(dir, signal));
  // A build given up on (aborted, failed) is tried again by the next call.
  built.catch(() => (built = undefined));
  return built;
}

/** Resolves once the package is built (for a test file's first hook: `beforeAll(packageBuilt, BUILD_WAIT_MS)`). */
export async function packageBuilt(): Promise<void> {
  await builtPackage();
}

const BUILT_IMPORTS = new URL('./built-imports.ts', import.meta.url).href;

/**
 * Node's arguments to run `script` (a TypeScript test fixture, or `builtCli()` with TypeScript plugins) on the
 * built package, without tsx: see built-imports.ts.
 */
export async function builtNodeArgs(script: string): Promise<string[]> {
  const dir = await builtPackage();
  return ['--import', `${BUILT_IMPORTS}?package=${encodeURIComponent(dir)}`, script];
}

/** `dist/app/cli.js` of the built package: the `steerbot` bin as the package installs it. */
export async function builtCli(): Promise<string> {
  return join(await builtPackage(), 'dist/app/cli.js');
}

/** Where the package of the sources as they are is built (or will be); also sets it for processes started later. */
export async function packageDir(): Promise<string> {
  const given = process.env[DIR_ENV];
  if (given) return given;
  const dir = await hashedDir();
  process.env[DIR_ENV] = dir;
  return dir;
}

async function hashedDir(): Promise<string> {
  const hash = createHash('sha256');
  const add = async (rel: string): Promise<void> => {
    const path = join(REPO, rel);
    if ((await stat(path)).isDirectory()) {
      for (const entry of (await readdir(path)).sort()) await add(join(rel, entry));
    } else {
      hash
        .update(`${rel}\0`)
        .update(await readFile(path))
        .update('\0');
    }
  };
  for (const entry of PACKAGE_SOURCES) await add(entry);
  // The compiler's version changes the output too.
  hash.update(JSON.parse(await readFile(join(REPO, 'node_modules/typescript/package.json'), 'utf8')).version);
  return join(tmpdir(), `${STEM}${hash.digest('hex').slice(0, 16)}`);
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

/** Whether process `pid` runs. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function ensureBuilt(dir: string, signal?: AbortSignal): Promise<string> {
  const lock = `${dir}.lock`;
  const deadline = Date.now() + BUILD_WAIT_MS;
  for (;;) {
    if (await exists(dir)) return dir;
    signal?.throwIfAborted();
    // A build of these sources that failed a moment ago fails again: no process tries it once more.
    const failed = await stat(`${dir}.failed`).catch(() => undefined);
    if (failed && Date.now() - failed.mtimeMs < FAILED_MS) throw new Error(await readFile(`${dir}.failed`, 'utf8'));
    let mine = false;
    try {
      await mkdir(lock);
      mine = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (mine) {
      try {
        await writeFile(join(lock, 'pid'), String(process.pid));
        if (!(await exists(dir))) {
          await build(dir, signal).catch(async (err: Error) => {
            if (!signal?.aborted) await writeFile(`${dir}.failed`, err.message);
            throw err;
          });
        }
        return dir;
      } finally {
        await rm(lock, { recursive: true, force: true });
      }
    }
    // Another process builds it; a lock whose process has died (killed mid-build) is taken over.
    const holder = Number(await readFile(join(lock, 'pid'), 'utf8').catch(() => ''));
    if (holder && !alive(holder)) await rm(lock, { recursive: true, force: true });
    if (Date.now() > deadline) throw new Error(`no build of the package in ${dir} within ${BUILD_WAIT_MS} ms (lock ${lock})`);
    await sleep(250);
  }
}

async function build(dir: string, signal?: AbortSignal): Promise<void> {
  const stage = `${dir}.build`;
  await rm(stage, { recursive: true, force: true });
  try {
    for (const entry of PACKAGE_SOURCES) await cp(join(REPO, entry), join(stage, entry), { recursive: true });
    await symlink(join(REPO, 'node_modules'), join(stage, 'node_modules'));
    signal?.throwIfAborted();
    await runBuild(stage, signal);
    await rename(stage, dir);
  } finally {
    await rm(stage, { recursive: true, force: true });
  }
  await removeOldBuilds(dir);
}

/** Runs scripts/build.mjs in `stage`; `signal` kills it and the compiler it started (its process group). */
function runBuild(stage: string, signal?: AbortSignal): Promise<void> {
  const child = spawn(process.execPath, ['scripts/build.mjs'], { cwd: stage, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (d: Buffer) => (output = (output + d.toString()).slice(-20_000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const stop = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  signal?.addEventListener('abort', stop, { once: true });
  // Not killed with the test process otherwise: a worker that exits takes its build down with it.
  process.once('exit', stop);
  return new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, sig) => {
      signal?.removeEventListener('abort', stop);
      process.off('exit', stop);
      if (code === 0) resolve();
      else reject(new Error(`building the package failed (${code ?? sig}):\n${output}`));
    });
  });
}

/** Removes builds of other sources made more than an hour ago (a run still using one started long before). */
async function removeOldBuilds(keep: string): Promise<void> {
  for (const name of await readdir(tmpdir())) {
    const path = join(tmpdir(), name);
    if (!name.startsWith(STEM) || path === keep || /\.(lock|build)$/.test(name)) continue;
    const s = await stat(path).catch(() => undefined);
    if (s && Date.now() - s.mtimeMs > KEEP_MS) await rm(path, { recursive: true, force: true });
  }
}
