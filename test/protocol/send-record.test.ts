/**
 * A send key release 0.1.0 recorded (its keys unscoped, shared by every
 * caller) across the upgrade: callers racing its retry share its lock, and
 * the result a retry keeps is found by the next, whoever asks.
 */
import { describe, expect, it } from 'vitest';
import { keepSendResult, type RecordSendOptions, recordSend, releaseSendLock, type SendCaller, sendKeys } from '../../src/protocol/send.js';
import { CID, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('a send key recorded by 0.1.0', () => {
  const fx = useProtocolFixture();
  const req = { conversationId: CID, text: 'Reminder: umbrella.', idempotencyKey: 'deploy-812' };
  const opts = (caller: SendCaller): RecordSendOptions => ({
    client: fx.redis,
    prefix: fx.prefix,
    dedupeTtlSeconds: 600,
    lockMs: 30_000,
    known: false,
    caller,
  });

  /** Records the send as 0.1.0 did: the same script's writes, under the unscoped key names; its lock released. */
  async function recordedBy010(): Promise<number> {
    const first = await recordSend(req, opts({ token: 'ops' }));
    if (first.kind !== 'recorded') throw new Error(`expected a new record, got ${first.kind}`);
    const scoped = sendKeys(fx.prefix, CID, req.idempotencyKey, { token: 'ops' });
    const old = sendKeys(fx.prefix, CID, req.idempotencyKey, 'unscoped');
    await fx.redis.rename(scoped.dedupe, old.dedupe);
    await fx.redis.rename(scoped.result, old.result);
    await fx.redis.del(scoped.lock);
    return first.seq;
  }

  it('gives its retry to one of two callers racing it (other tokens, or the package): one lock between them', async () => {
    const seq = await recordedBy010();
    const [a, b] = await Promise.all([recordSend(req, opts({ token: 'ops' })), recordSend(req, opts('package'))]);
    expect([a.kind, b.kind].sort()).toEqual(['busy', 'duplicate']);
    const held = a.kind === 'duplicate' ? a : b;
    expect(held).toMatchObject({ seq, scope: 'unscoped' });
    if (held.kind !== 'duplicate') throw new Error('unreachable');
    await releaseSendLock(fx.redis, fx.prefix, req, held.scope, held.lockToken);
    expect(await recordSend(req, opts({ token: 'ci' }))).toMatchObject({ kind: 'duplicate', seq, scope: 'unscoped' });
  });

  it('keeps the result of the retry that delivered it where the next retry, of any caller, finds it', async () => {
    const seq = await recordedBy010();
    const retry = await recordSend(req, opts({ token: 'ops' }));
    if (retry.kind !== 'duplicate') throw new Error(`expected a duplicate, got ${retry.kind}`);
    await keepSendResult(fx.redis, fx.prefix, req, retry.scope, seq, ['5012']);
    await releaseSendLock(fx.redis, fx.prefix, req, retry.scope, retry.lockToken);
    for (const caller of [{ token: 'ops' }, { token: 'ci' }, 'package'] as const) {
      expect(await recordSend(req, opts(caller))).toEqual({ kind: 'done', seq, messageIds: ['5012'] });
    }
  });

  it('is a new key for every caller once 0.1.0 recorded nothing under it', async () => {
    const a = await recordSend(req, opts({ token: 'ops' }));
    const b = await recordSend(req, opts({ token: 'ci' }));
    expect([a.kind, b.kind]).toEqual(['recorded', 'recorded']);
    expect(await recordSend(req, opts({ token: 'ops' }))).toMatchObject({ kind: 'busy', seq: a.kind === 'recorded' ? a.seq : 0 });
  });
});
