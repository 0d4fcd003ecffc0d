/** ingest: dedupe of platform retries, refusal of bad input, the steering capability and the /queue override. */
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/errors.js';
import type { IncomingMessage } from '../../src/protocol/index.js';
import { CID, expectKind, useProtocolFixture } from '../helpers/protocol-fixture.js';

describe('ingest', () => {
  const fx = useProtocolFixture();

  describe('when the same update is delivered again', () => {
    it('answers duplicate with the original seq and writes nothing', async () => {
      const d = fx.dispatch();
      const first = expectKind(await d.ingest(fx.message(1)), 'new-run');
      const before = await fx.snapshot();

      // A retry carries the same update key; its body does not matter.
      expect(await d.ingest(fx.message(1, { text: 'edited retry' }))).toEqual({ kind: 'duplicate', seq: first.seq });
      expect(await fx.snapshot()).toEqual(before);
    });

    it('does not steer a duplicate into a running run', async () => {
      const { dispatch, runId } = await fx.running();
      const steered = expectKind(await dispatch.ingest(fx.message(1)), 'steered');
      const before = await fx.snapshot();

      expect(await dispatch.ingest(fx.message(1))).toEqual({ kind: 'duplicate', seq: steered.seq });
      expect(await fx.steering(runId)).toEqual([steered.seq]);
      expect(await fx.snapshot()).toEqual(before);
    });

    it('keeps the dedupe key for the configured TTL', async () => {
      const d = fx.dispatch({ dedupeTtlSeconds: 120 });
      await d.ingest(fx.message(1));
      const ttl = await fx.redis.ttl(fx.keys().dedupe('telegram:1'));
      expect(ttl).toBeGreaterThan(110);
      expect(ttl).toBeLessThanOrEqual(120);
      expect(await fx.redis.get(fx.keys().dedupe('telegram:1'))).toBe('1');
    });

    it('treats the same update key in another conversation as a different update', async () => {
      const d = fx.dispatch();
      expectKind(await d.ingest(fx.message(1)), 'new-run');
      expectKind(await d.ingest(fx.message(1, { conversationId: 'telegram:43' })), 'new-run');
    });
  });

  describe('when the input is bad', () => {
    const bad: Array<[string, (m: IncomingMessage) => IncomingMessage]> = [
      ['empty text and no attachments', (m) => ({ ...m, text: '' })],
      ['empty text and an empty attachment list', (m) => ({ ...m, text: '', attachments: [] })],
      ['text over maxMessageChars', (m) => ({ ...m, text: 'x'.repeat(11) })],
      ['a conversation id with {', (m) => ({ ...m, conversationId: 'telegram:{42' })],
      ['a conversation id with }', (m) => ({ ...m, conversationId: 'telegram:42}' })],
      ['a conversation id with whitespace', (m) => ({ ...m, conversationId: 'telegram: 42' })],
      ['an empty conversation id', (m) => ({ ...m, conversationId: '' })],
      ['a missing sender id', (m) => ({ ...m, sender: { name: 'Ann' } as IncomingMessage['sender'] })],
      ['an empty sender id', (m) => ({ ...m, sender: { id: '' } })],
      ['a missing sender', (m) => ({ ...m, sender: undefined as unknown as IncomingMessage['sender'] })],
      ['an update key with {', (m) => ({ ...m, updateKey: 'telegram:{1}' })],
      ['an empty update key', (m) => ({ ...m, updateKey: '' })],
      ['a reply-to text over maxMessageChars', (m) => ({ ...m, replyTo: { messageId: '7', text: 'y'.repeat(11) } })],
      ['an attachment with an unknown kind', (m) => ({ ...m, attachments: [{ kind: 'hologram', ref: 'x' } as never] })],
    ];

    it.each(bad)('refuses %s with InvalidInputError and writes no key', async (_name, mutate) => {
      const d = fx.dispatch({ maxMessageChars: 10 });
      const err = await d.ingest(mutate(fx.message(1, { text: 'hello' }))).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).code).toBe('INVALID_INPUT');
      expect(await fx.allKeys()).toEqual([]);
    });

    it('refuses metadata that is not JSON-serializable with InvalidInputError and writes no key', async () => {
      const d = fx.dispatch();
      const err = await d.ingest(fx.message(1, { metadata: { big: 10n } })).catch((e: unknown) => e);
      expect(await fx.allKeys()).toEqual([]);
      expect(err).toBeInstanceOf(InvalidInputError);
    });

    it('records metadata with the message, readable back as the same value', async () => {
      const d = fx.dispatch();
      const metadata = { crm: { ticket: 7, tags: ['vip', 'é'] }, note: 'quote " and }' };
      await d.ingest(fx.message(1, { metadata }));
      const [entry] = await fx.record();
      expect(entry).toMatchObject({ kind: 'message.received', text: 'message 1', metadata });
    });

    it('refuses metadata over its size cap and writes no key', async () => {
      const d = fx.dispatch();
      const err = await d.ingest(fx.message(1, { metadata: { blob: 'x'.repeat(9000) } })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });

    it.each(['has:colon', '12345', 'x'])('refuses the run id %s (not a usable BullMQ job id) and writes no key', async (runId) => {
      const d = fx.dispatch();
      const err = await d.ingest(fx.message(1), { runId }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });

    it('refuses an unknown per-call policy and writes no key', async () => {
      const d = fx.dispatch();
      await expect(d.ingest(fx.message(1), { policy: 'yolo' as never })).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });

    it('accepts text of exactly maxMessageChars', async () => {
      const d = fx.dispatch({ maxMessageChars: 10 });
      expectKind(await d.ingest(fx.message(1, { text: 'x'.repeat(10) })), 'new-run');
    });

    it('accepts empty text when there is an attachment', async () => {
      const d = fx.dispatch();
      expectKind(await d.ingest(fx.message(1, { text: '', attachments: [{ kind: 'image', ref: 'file-1' }] })), 'new-run');
      const [entry] = await fx.record();
      expect(entry).toMatchObject({ kind: 'message.received', text: '', attachments: [{ kind: 'image', ref: 'file-1' }] });
    });
  });

  describe('when the runner does not declare the steering capability', () => {
    it('handles steer as collect: messages wait on pending, not in a steering list', async () => {
      const { dispatch, runs, run, runId } = await fx.running({ steeringCapable: false, defaultPolicy: 'steer' });
      expect(await dispatch.ingest(fx.message(1))).toEqual({ kind: 'pending', seq: 3, runId, depth: 1, reason: 'policy' });
      expect(await dispatch.ingest(fx.message(2))).toEqual({ kind: 'pending', seq: 4, runId, depth: 2, reason: 'policy' });
      expect(await fx.steering(runId)).toEqual([]);
      expect(await dispatch.status(CID)).toMatchObject({ effectivePolicy: 'collect', steeringDepth: 0, pendingDepth: 2 });

      // collect: the successor takes all pending at once
      const fin = await runs.finish(run, 'completed', { successorId: 'run-next' });
      expect(fin).toEqual({ kind: 'ended', successor: { runId: 'run-next', inputs: [3, 4] } });
    });

    it('also turns a /queue steer override into collect', async () => {
      const { dispatch, runId } = await fx.running({ steeringCapable: false, defaultPolicy: 'followup' });
      await dispatch.setPolicy(fx.source(1), 'steer');
      expect(await dispatch.ingest(fx.message(1))).toMatchObject({ kind: 'pending', runId, reason: 'policy' });
      expect(await dispatch.status(CID)).toMatchObject({ policyOverride: 'steer', effectivePolicy: 'collect' });
    });
  });

  describe('when the conversation has a /queue override', () => {
    it('routes by the override instead of the default, and by the default again once cleared', async () => {
      const { dispatch, runId } = await fx.running({ defaultPolicy: 'steer' });

      expect(await dispatch.setPolicy(fx.source(1), 'followup')).toEqual({ kind: 'ok', seq: 3 });
      expect(await dispatch.status(CID)).toMatchObject({ policyOverride: 'followup' });
      expect(await dispatch.ingest(fx.message(1))).toEqual({ kind: 'pending', seq: 4, runId, depth: 1, reason: 'policy' });

      expect(await dispatch.setPolicy(fx.source(2), undefined)).toEqual({ kind: 'ok', seq: 5 });
      expect((await dispatch.status(CID)).policyOverride).toBeUndefined();
      // The default (steer) applies again; message 4 still waits in pending, so message 6 queues behind it.
      expect(await dispatch.ingest(fx.message(2))).toEqual({ kind: 'pending', seq: 6, runId, depth: 2, reason: 'order' });

      const record = await fx.record();
      expect(record.map((e) => e.kind)).toEqual([
        'message.received',
        'run.started',
        'command.received',
        'message.received',
        'command.received',
        'message.received',
      ]);
      expect(record[2]).toMatchObject({ kind: 'command.received', command: '/queue', args: 'followup', updateKey: 'telegram:cmd-1' });
      expect(record[4]).toMatchObject({ kind: 'command.received', command: '/queue', args: 'default' });
    });

    it('wins over a policy the caller passes', async () => {
      const { dispatch, runId } = await fx.running();
      await dispatch.setPolicy(fx.source(1), 'collect');
      expect(await dispatch.ingest(fx.message(1), { policy: 'interrupt' })).toMatchObject({ kind: 'pending', runId, reason: 'policy' });
      expect((await fx.runRecord(runId)).stop).toBeUndefined();
    });

    it('dedupes a repeated /queue update', async () => {
      const d = fx.dispatch();
      expect(await d.setPolicy(fx.source(1), 'collect')).toEqual({ kind: 'ok', seq: 1 });
      const before = await fx.snapshot();
      expect(await d.setPolicy(fx.source(1), 'followup')).toEqual({ kind: 'duplicate', seq: 1 });
      expect(await fx.snapshot()).toEqual(before);
      expect((await d.status(CID)).policyOverride).toBe('collect');
    });

    it('refuses an unknown policy and writes no key', async () => {
      const d = fx.dispatch();
      await expect(d.setPolicy(fx.source(1), 'yolo' as never)).rejects.toBeInstanceOf(InvalidInputError);
      expect(await fx.allKeys()).toEqual([]);
    });
  });
});
