/**
 * `npm run build`: compiles the sources to dist/ (tsconfig.build.json), copies
 * the files that are not TypeScript (page assets, Lua scripts), and writes
 * dist/.build-stamp last, so a build cut short is not taken for a finished one.
 *
 * `--if-stale` (npm's `prestart`): builds only when dist/ is missing or older
 * than a source, so `npm start` runs compiled JavaScript; an up-to-date dist/
 * costs one walk over the source folders.
 *
 * Plain JavaScript: it runs before anything is compiled.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
/** What tsconfig.build.json compiles; their other files are copied as they are. */
const SOURCE_DIRS = ['src', 'host', 'runner', 'plugins', 'app', 'testing'];
/** Files whose change changes the output. */
const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json'];
const DIST = join(ROOT, 'dist');
const STAMP = join(DIST, '.build-stamp');

/** Newest modification time under `path`; directories count too (a deleted or renamed file changes its folder's). */
function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  let latest = stat.mtimeMs;
  if (stat.isDirectory()) for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

function stale() {
  const built = statSync(STAMP, { throwIfNoEntry: false });
  if (!built) return 'dist/ has not been built';
  const sources = Math.max(...[...SOURCE_DIRS, ...SOURCE_FILES].map((p) => newest(join(ROOT, p))));
  return sources > built.mtimeMs ? 'the sources changed since dist/ was built' : undefined;
}

function build() {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    process.stderr.write('steerbot: cannot build dist/: TypeScript is not installed (run `npm ci` with the dev dependencies)\n');
    process.exit(1);
  }
  // The stamp carries the time the build started: a source saved during the build makes the next start build again.
  const started = new Date();
  rmSync(DIST, { recursive: true, force: true });
  const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
  if (compiled.status !== 0) process.exit(compiled.status ?? 1);
  for (const dir of SOURCE_DIRS) cpSync(join(ROOT, dir), join(DIST, dir), { recursive: true, filter: (f) => !f.endsWith('.ts') });
  writeFileSync(STAMP, `${started.toISOString()}\n`);
  utimesSync(STAMP, started, started);
}

if (process.argv.includes('--if-stale')) {
  const why = stale();
  if (why) {
    process.stderr.write(`steerbot: building dist/ (${why})\n`);
    build();
  }
} else {
  build();
}
