/**
 * `npm run api`: the public surface of every entry point in package.json's `exports`, as API Extractor
 * reports in `api/` (one `.api.md` per entry point). CI runs `npm run api -- --check`, which fails when a
 * report differs from the checked-in one: a change to the public surface is a reviewed diff, never an accident.
 * `npm run api` (no flag) rewrites the reports after an intended change.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Extractor, ExtractorConfig, ExtractorLogLevel } from '@microsoft/api-extractor';

const root = resolve(import.meta.dirname, '..');
const check = process.argv.includes('--check');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, string | { types?: string }> };

// Declarations only, into a folder of our own (dist/ may be stale or absent), at a fixed place: the reports name it.
const out = join(root, '.api-build');
rmSync(out, { recursive: true, force: true });
try {
  execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--emitDeclarationOnly', '--outDir', out], {
    cwd: root,
    stdio: 'inherit',
  });
  // An entry point that names another (`import type { … } from 'steerbot/channel'`) names that entry point's
  // surface, reported in its own report: a copy of the declarations under node_modules/ makes API Extractor
  // treat it as the external package it is, whether or not dist/ exists (self-reference would resolve there).
  const external = join(out, 'node_modules', 'steerbot');
  for (const entry of readdirSync(out)) cpSync(join(out, entry), join(external, entry), { recursive: true });
  const paths = Object.fromEntries(
    Object.entries(pkg.exports).flatMap(([subpath, target]) => {
      const types = typeof target === 'string' ? undefined : target.types;
      return types ? [[`steerbot${subpath.slice(1)}`, [join(external, types.replace(/^\.\/dist\//, ''))]]] : [];
    }),
  );
  let changed = 0;
  const failed: string[] = [];
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const types = typeof target === 'string' ? undefined : target.types;
    if (!types) continue;
    const name = subpath === '.' ? 'steerbot' : `steerbot-${subpath.slice(2).replaceAll('/', '-')}`;
    const config = ExtractorConfig.prepare({
      configObjectFullPath: join(root, 'api', `${name}.json`),
      packageJsonFullPath: join(root, 'package.json'),
      configObject: {
        projectFolder: root,
        mainEntryPointFilePath: join(out, types.replace(/^\.\/dist\//, '')),
        compiler: { overrideTsconfig: { compilerOptions: { types: ['node'], skipLibCheck: true, module: 'nodenext', moduleResolution: 'nodenext', paths } } },
        apiReport: { enabled: true, reportFileName: name, reportFolder: join(root, 'api'), reportTempFolder: join(out, 'report') },
        docModel: { enabled: false },
        dtsRollup: { enabled: false },
        tsdocMetadata: { enabled: false },
        messages: {
          compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
          // Release tags (@public/@beta) are not how this package marks its surface: the entry point is.
          extractorMessageReporting: {
            default: { logLevel: ExtractorLogLevel.Warning },
            'ae-missing-release-tag': { logLevel: ExtractorLogLevel.None },
            // A type the surface uses but no entry point exports: an error, so the surface stays closed (narrow the
            // type, or export it where it belongs).
            'ae-forgotten-export': { logLevel: ExtractorLogLevel.Error, addToApiReportFile: false },
            // Undocumented members are marked in the report itself; the console stays readable.
            'ae-undocumented': { logLevel: ExtractorLogLevel.None },
          },
          tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
        },
      },
    });
    const result = Extractor.invoke(config, { localBuild: !check, showVerboseMessages: false });
    if (result.apiReportChanged) {
      changed++;
      console.log(`${check ? 'changed' : 'updated'}: api/${name}.api.md`);
    }
    if (result.errorCount > 0) failed.push(`${name}: ${result.errorCount} error(s)`);
  }
  if (failed.length > 0) throw new Error(`api: ${failed.join('; ')}`);
  if (check && changed > 0) {
    console.error(`api: ${changed} report(s) differ from the public surface; run \`npm run api\` and commit the reports if the change is intended`);
    process.exitCode = 1;
  } else console.log(`api: ${check ? 'reports match the public surface' : 'reports written'}`);
} finally {
  rmSync(out, { recursive: true, force: true });
}
