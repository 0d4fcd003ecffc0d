/**
 * `node --import <this file's URL>?package=<dir> <fixture>.ts` (see
 * `builtNodeArgs` in built-package.ts): runs a test fixture written in
 * TypeScript, or a TypeScript plugin of the built CLI, without tsx. Node
 * strips the types itself; this hook points imports of the package's sources
 * (`src/`, `runner/`, …) from the repository's files at the built package's
 * `dist/` (`dir`), and imports of other test files (`./x.js`) at their
 * TypeScript (`./x.ts`). Nothing is compiled as the process starts.
 *
 * Plain, erasable TypeScript with no imports of ours: Node loads it before any hook.
 */
import { existsSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = new URL('../../', import.meta.url).href;
/** The folders the build compiles (tsconfig.build.json; `COMPILED` in built-package.ts). */
const COMPILED = ['src', 'host', 'runner', 'plugins', 'app', 'testing'];
const packageDir = new URL(import.meta.url).searchParams.get('package');
if (!packageDir) throw new Error('built-imports: no ?package=<dir> (the built package, see test/helpers/built-package.ts)');
const DIST = new URL('dist/', pathToFileURL(`${packageDir}/`)).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (!specifier.startsWith('.') || !context.parentURL?.startsWith(REPO) || !specifier.endsWith('.js')) return nextResolve(specifier, context);
    const url = new URL(specifier, context.parentURL).href;
    const inRepo = url.slice(REPO.length);
    if (inRepo.startsWith('node_modules/')) return nextResolve(specifier, context);
    if (COMPILED.some((dir) => inRepo.startsWith(`${dir}/`))) return { url: DIST + inRepo, shortCircuit: true };
    const ts = `${url.slice(0, -'.js'.length)}.ts`;
    if (!existsSync(fileURLToPath(url)) && existsSync(fileURLToPath(ts))) return { url: ts, shortCircuit: true };
    return nextResolve(specifier, context);
  },
});
