/**
 * The observability docs stay true: docs/operations.md lists every metric
 * steerbot defines (and no other), and the Grafana dashboard queries only
 * metrics that exist.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { metricNames } from '../../src/telemetry/metrics.js';
// A plugin registers its metrics when its module loads (the MCP client loads only when servers are configured).
import '../../plugins/local-agent/mcp.js';

const root = new URL('../../', import.meta.url);
const operations = readFileSync(new URL('docs/operations.md', root), 'utf8');
const section = operations.slice(operations.indexOf('## Observability'));
const dashboard = JSON.parse(readFileSync(new URL('docs/grafana-dashboard.json', root), 'utf8')) as {
  panels: Array<{ type: string; targets?: Array<{ expr: string }> }>;
};

describe('docs/operations.md § Observability', () => {
  it('has a table row for every metric, and rows only for metrics that exist', () => {
    const documented = [...section.matchAll(/^\| `(steerbot_[a-z_]+)` \|/gm)].map((m) => m[1]);
    expect([...new Set(documented)].sort()).toEqual([...metricNames()].sort());
  });
});

describe('docs/grafana-dashboard.json', () => {
  it('queries only metrics steerbot serves (histograms by their series)', () => {
    const exprs = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
    expect(exprs.length).toBeGreaterThan(10);
    const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\b(steerbot_[a-z_]+)/g)].map((m) => m[1]!.replace(/_(bucket|count|sum)$/, ''))));
    for (const name of used) expect(metricNames()).toContain(name);
    // Every metric has a panel.
    for (const name of metricNames()) expect(used.has(name) ? name : `${name} (no panel)`).toBe(name);
  });
});
