/**
 * docs/security.md is the threat model: every row of its threats table names
 * the test that attacks it, and every adversarial suite in test/security/ is
 * named by some row. A row without a test, a test that was renamed or
 * deleted, or a suite nobody lists fails here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, ROOT), 'utf8');

interface ThreatRow {
  threat: string;
  actor: string;
  rule: string;
  test: string;
}

const ACTORS = new Set(['stranger', 'group member', 'approved person', 'admin', 'operator', 'API client', 'network attacker', 'model (injected text)']);

/** The rows of the table under `## Threats`. */
function threatRows(doc: string): ThreatRow[] {
  const section = doc.split(/^## Threats$/m)[1]?.split(/^## /m)[0] ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|\s*(threat|---)/.test(line))
    .map((line) => {
      const cells = line
        .slice(1, line.endsWith('|') ? -1 : undefined)
        .split(' | ')
        .map((c) => c.trim());
      const [threat = '', actor = '', rule = '', test = ''] = cells;
      return { threat, actor, rule, test };
    });
}

/** Whether `source` declares a test (or describe) titled `title`, in any quote style. */
function declaresTest(source: string, title: string): boolean {
  const quoted = [`'${title.replaceAll("'", "\\'")}'`, `"${title}"`, `\`${title}\``];
  return quoted.some((q) => source.includes(q));
}

describe('docs/security.md', () => {
  const rows = threatRows(read('docs/security.md'));

  it('lists threats, each with an actor from the actors table, a rule and a test', () => {
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) {
      expect(ACTORS.has(row.actor), `actor "${row.actor}" of "${row.threat}"`).toBe(true);
      expect(row.rule.length, `rule of "${row.threat}"`).toBeGreaterThan(10);
      expect(row.test, `test of "${row.threat}"`).toMatch(/^test\/\S+\.test\.ts › .+/);
    }
  });

  it('names only tests that exist, by file and exact title', () => {
    for (const row of rows) {
      const [file = '', title = ''] = row.test.split(' › ');
      const source = read(file);
      expect(declaresTest(source, title), `${file} declares no test "${title}" (row "${row.threat}")`).toBe(true);
    }
  });

  it('names every adversarial suite in test/security/', () => {
    const named = new Set(rows.map((r) => r.test.split(' › ')[0]));
    const suites = readdirSync(new URL('test/security/', ROOT)).filter((f) => f.endsWith('.test.ts') && f !== 'threat-model.test.ts');
    for (const suite of suites) expect(named.has(`test/security/${suite}`), `test/security/${suite} is named by no threat row`).toBe(true);
  });
});
