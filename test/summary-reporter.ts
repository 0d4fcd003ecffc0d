/**
 * Prints one plain closing line, `N passed, N failed` (and skipped), after
 * vitest's own summary, so CI logs can be read by tools that look for it.
 */
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const m of testModules) {
      // A file that failed to load has no tests; it still failed.
      if (m.state() === 'failed' && [...m.children.allTests()].length === 0) failed++;
      for (const t of m.children.allTests()) {
        const state = t.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
    }
    failed += unhandledErrors.length;
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  }
}
