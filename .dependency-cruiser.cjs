/**
 * Layer rules (DESIGN: src/ core ← host/, runner/ roles ← plugins/ ← app/ composition; testing/ is the public
 * test kit on top). `npm run deps` fails on any `error` below. Type-only imports count: a type from an upper
 * layer is still a dependency on it (tsPreCompilationDeps).
 */
const PRODUCTION = '^(src|host|runner|plugins|app)/';

/** Layer rules: [name, layer folder, folders it may not import, why]. */
const LAYER_RULES = [
  ['core-is-the-bottom', 'src', 'host|runner|plugins|app|testing|test|bench|examples', 'src/ (core) knows no role, plugin, composition or test code; move the piece to app/ or pass it in as an option.'],
  ['host-imports-only-core', 'host', 'runner|plugins|app|testing|test|bench|examples', "host/ may import src/ and host/ only: not the runner, plugins, app/ or tests (wiring plugins in is app/'s job)."],
  ['runner-imports-only-core', 'runner', 'host|plugins|app|testing|test|bench|examples', 'runner/ may import src/ and runner/ only: not the host, plugins, app/ or tests.'],
  ['app-ships-no-tests', 'app', 'test|bench|examples', 'app/ (composition) may import every production layer, but not test/, bench/ or examples/.'],
  ['app-ships-no-test-kit', 'app', 'testing', 'app/ is production code; the test kit (testing/) builds on app/, not the other way round.'],
  ['test-kit-ships-no-tests', 'testing', 'test|bench|examples', 'testing/ is published: it may import src/, host/, runner/, plugins/, app/, never test/, bench/ or examples/.'],
].map(([name, from, to, comment]) => ({ name, comment, severity: 'error', from: { path: `^${from}/` }, to: { path: `^(${to})/` } }));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...LAYER_RULES,
    {
      name: 'plugins-import-the-package',
      comment:
        "A plugin imports the package, not the repository: only its own folder, npm packages and the public entry points. Import it from 'steerbot/plugin' (the kit), 'steerbot/channel' or 'steerbot/runner' (the contracts); if it is not exported, make it public API in src/plugin/kit.ts, src/channel.ts or runner/index.ts, typed and documented in docs/plugins.md.",
      severity: 'error',
      from: { path: '^plugins/([^/]+)/' },
      to: {
        path: '^(src|host|runner|app|testing|test|bench|examples|plugins)/',
        pathNot: ['^plugins/$1/', '^src/channel\\.ts$', '^src/plugin/kit\\.ts$', '^runner/index\\.ts$'],
      },
    },
    {
      name: 'plugins-are-independent',
      comment: 'A plugin never imports another plugin\'s folder; shared code belongs in src/ or runner/.',
      severity: 'error',
      from: { path: '^plugins/([^/]+)/' },
      to: { path: '^plugins/', pathNot: '^plugins/$1/' },
    },
    {
      name: 'no-circular',
      comment: 'A run-time import cycle between production modules makes load order matter; split the shared piece out.',
      severity: 'error',
      from: { path: PRODUCTION },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'no-circular-types',
      comment: 'A cycle closed only by `import type`: harmless at run time, but the two files are one unit; move the type to the lower one.',
      severity: 'warn',
      from: { path: PRODUCTION },
      to: { circular: true, via: { dependencyTypes: ['type-only'] } },
    },
    {
      name: 'production-not-to-dev-dep',
      comment: 'Production code (src, host, runner, plugins, app) may not import a devDependency, not even a type: `npm ci --omit=dev` and consumers of our types would break.',
      severity: 'error',
      from: { path: PRODUCTION },
      to: { dependencyTypes: ['npm-dev'], pathNot: '(^|/)node_modules/@types/' },
    },
    {
      name: 'no-non-package-json',
      comment: 'Imports a package that is not in package.json (it only works because something else pulled it in).',
      severity: 'error',
      from: {},
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import that resolves to nothing on disk.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'no-deprecated-core',
      comment: 'A deprecated Node core module.',
      severity: 'error',
      from: {},
      to: { dependencyTypes: ['core'], path: '^(punycode|domain|constants|sys|_linklist|_stream_wrap)$' },
    },
    {
      name: 'not-to-deprecated',
      comment: 'A package version its authors have deprecated: upgrade or replace it.',
      severity: 'warn',
      from: {},
      to: { dependencyTypes: ['deprecated'] },
    },
    {
      name: 'no-duplicate-dep-types',
      comment: 'A package listed in both dependencies and devDependencies.',
      severity: 'warn',
      from: {},
      to: { moreThanOneDependencyType: true, dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|dist|\\.steerbot)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    combinedDependencies: false,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};
