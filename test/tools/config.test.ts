/**
 * The tool settings of `agents.local-agent` in a config file: MCP servers
 * (stdio or HTTP) validated with paths named, their secrets redacted by
 * `check-config`'s redaction; the other tool settings validated.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { redactConfig } from '../../app/summary.js';
import { ConfigError } from '../../src/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'steerbot-tools-config-'));
let n = 0;
function configFile(agent: unknown): string {
  const file = join(dir, `config-${n++}.json`);
  writeFileSync(file, JSON.stringify({ agents: { 'local-agent': agent } }));
  return file;
}
const issues = (agent: unknown): string[] => {
  try {
    readConfig({ file: configFile(agent), env: {} });
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map((i) => i.path);
    throw err;
  }
  return [];
};

describe('tool settings', () => {
  it('reads stdio and HTTP MCP servers with their defaults, and redacts env and header values', () => {
    const config = readConfig({
      file: configFile({
        mcpServers: {
          files: { command: 'npx', args: ['-y', 'server-filesystem', '/srv'], env: { API_TOKEN: 'stdio-secret-1' } },
          crm: { url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer http-secret-2' }, tools: ['lookup'], defaultPolicy: 'allow' },
        },
        toolResultMaxChars: 8000,
        idempotentTools: ['crm__lookup'],
        httpFetchAllow: ['10.0.0.0/8'],
      }),
      env: {},
    });
    const agent = config.agents['local-agent'] as Record<string, any>;
    expect(agent.mcpServers.files).toEqual({
      command: 'npx',
      args: ['-y', 'server-filesystem', '/srv'],
      env: { API_TOKEN: 'stdio-secret-1' },
      timeoutMs: 30_000,
      connectTimeoutMs: 10_000,
    });
    expect(agent.mcpServers.crm).toMatchObject({ url: 'https://mcp.example.com/mcp', tools: ['lookup'], defaultPolicy: 'allow' });
    expect(agent.toolResultMaxChars).toBe(8000);
    const text = JSON.stringify(redactConfig(config));
    expect(text).not.toContain('stdio-secret-1');
    expect(text).not.toContain('http-secret-2');
    expect(text).toContain('"API_TOKEN":"[set]"');
    expect(text).toContain('"Authorization":"[set]"');
  });

  it('leaves unset tool settings out of the effective configuration', () => {
    const agent = readConfig({ env: {} }).agents['local-agent'] as Record<string, unknown>;
    for (const key of ['mcpServers', 'toolResultMaxChars', 'artifactTtlSeconds', 'idempotentTools', 'httpFetchAllow']) expect(agent[key], key).toBeUndefined();
  });

  it('names every bad field', () => {
    expect(issues({ mcpServers: { 'bad name!': { command: 'x' } } })).toEqual([expect.stringContaining('agents.local-agent.mcpServers')]);
    expect(issues({ mcpServers: { s: { url: 'ftp://x' } } })).toEqual([expect.stringContaining('agents.local-agent.mcpServers.s')]);
    expect(issues({ mcpServers: { s: { command: 'x', url: 'http://x' } } })).toEqual([expect.stringContaining('agents.local-agent.mcpServers.s')]);
    expect(issues({ mcpServers: { s: { command: 'x', tools: [] } } })).toEqual([expect.stringContaining('agents.local-agent.mcpServers.s')]);
    expect(issues({ mcpServers: { s: { command: 'x', defaultPolicy: 'ask' } } })).toEqual([expect.stringContaining('agents.local-agent.mcpServers.s')]);
    expect(issues({ toolResultMaxChars: 10 })).toEqual(['agents.local-agent.toolResultMaxChars']);
    expect(issues({ artifactTtlSeconds: 1.5 })).toEqual(['agents.local-agent.artifactTtlSeconds']);
    expect(issues({ httpFetchAllow: ['10.0.0.0/8', '10.0.0.0/33'] })).toEqual(['agents.local-agent.httpFetchAllow.1']);
    expect(issues({ httpFetchAllow: ['http://intranet/'] })).toEqual(['agents.local-agent.httpFetchAllow.0']);
  });
});
