import { describe, expect, it } from 'vitest';
import { ConfigError, redactSecrets, ScriptError } from '../src/errors.js';

describe('redactSecrets', () => {
  it('redacts credentials in queries, JSON, URLs and bot tokens', () => {
    expect(redactSecrets('GET /x?token=abc123&y=1')).toBe('GET /x?token=[redacted]&y=1');
    expect(redactSecrets('{"apiKey": "sk-abcdefghijkl"}')).toBe('{"apiKey": "[redacted]"}');
    expect(redactSecrets('redis://user:hunter2@host:6379')).toBe('redis://user:[redacted]@host:6379');
    expect(redactSecrets('https://api.telegram.org/bot123456789:AAAbbbCCCdddEEEfffGGGhhhIIIjjjKKKlll/getMe')).not.toContain('AAAbbb');
  });

  it('leaves field names in prose alone', () => {
    expect(redactSecrets('channels.webhooks.crm.secret: expected at least 16 characters')).toBe(
      'channels.webhooks.crm.secret: expected at least 16 characters',
    );
  });
});

describe('ConfigError', () => {
  it('names every bad field with what it expected', () => {
    const err = new ConfigError([
      { path: 'redis.password', message: 'expected a string' },
      { path: 'channels.webhooks.crm.secret', message: 'expected at least 16 characters' },
    ]);
    expect(err.code).toBe('CONFIG');
    expect(err.message).toContain('redis.password: expected a string');
    expect(err.message).toContain('channels.webhooks.crm.secret: expected at least 16 characters');
  });
});

describe('ScriptError', () => {
  it('carries the script name and a code to branch on', () => {
    const err = new ScriptError('ingest', 'unexpected reply');
    expect(err).toMatchObject({ script: 'ingest', code: 'SCRIPT' });
    expect(err.message).toBe('ingest: unexpected reply');
  });
});
