/**
 * The observability docs stay true: docs/operations.md lists every metric
 * steerbot defines (and no other), and the Grafana dashboard queries only
 * metrics that exist.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { metricNames } from '../../src/telemetry/metrics.js';

const root = new URL('../../', import.meta.url);

// A plugin registers its metrics when its module loads, and plugins load lazily (the MCP client only when servers
// are configured): load every module that declares some, so the list is the same whatever else this process loaded.
const pluginSources = readdirSync(new URL('plugins/', root), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
const withMetrics = pluginSources.filter((f) => readFileSync(new URL(`plugins/${f}`, root), 'utf8').includes('pluginMetrics('));
await Promise.all(withMetrics.map((f) => import(new URL(`plugins/${f}`, root).href)));
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
