/**
 * Selecting the http-agent runner: its settings under `agents.http-agent`,
 * from the environment, validated by its own schema; required settings and
 * bad values are named, and a secret never appears in an error.
 */
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../app/config.js';
import { configErrorOf } from '../helpers/config-error.js';

describe('agents.http-agent', () => {
  it('reads the agent URL, secret and timeouts from the environment, with defaults for the rest', () => {
    const config = readConfig({
      env: {
        STEERBOT_RUNNER_PLUGIN: 'http-agent',
        STEERBOT_AGENT_URL: 'http://agent.internal:8787/run',
        STEERBOT_AGENT_SECRET: 'agent-secret-0123456789',
        STEERBOT_AGENT_PUBLIC_URL: 'http://runner-1.internal:8080',
        STEERBOT_AGENT_IDLE_TIMEOUT_MS: '5000',
      },
    });
    expect(config.runner.plugin).toBe('http-agent');
    expect(config.agents['http-agent']).toEqual({
      url: 'http://agent.internal:8787/run',
      secret: 'agent-secret-0123456789',
      publicUrl: 'http://runner-1.internal:8080',
      connectTimeoutMs: 10_000,
      firstEventTimeoutMs: 60_000,
      idleTimeoutMs: 5000,
      maxEventBytes: 1_048_576,
      maxMessageChars: 32_000,
      maxStateBytes: 65_536,
      steeringMode: 'all',
    });
  });

  it('names the missing URL and secret when the runner is selected without them', () => {
    const paths = configErrorOf({ STEERBOT_RUNNER_PLUGIN: 'http-agent' }).issues.map((i) => i.path);
    expect(paths).toEqual(expect.arrayContaining(['agents.http-agent.url', 'agents.http-agent.secret']));
  });

  it('names a bad URL, a short secret and an out-of-range timeout, without echoing the secret', () => {
    const err = configErrorOf({
      STEERBOT_RUNNER_PLUGIN: 'http-agent',
      STEERBOT_AGENT_URL: 'ftp://agent',
      STEERBOT_AGENT_SECRET: 'short-s3cret',
      STEERBOT_AGENT_CONNECT_TIMEOUT_MS: '900000',
    });
    expect(err.issues.map((i) => i.path).sort()).toEqual(['agents.http-agent.connectTimeoutMs', 'agents.http-agent.secret', 'agents.http-agent.url']);
    expect(err.message).toContain('STEERBOT_AGENT_CONNECT_TIMEOUT_MS');
    expect(err.message).not.toContain('short-s3cret');
  });
});
