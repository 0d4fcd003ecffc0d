/** A storm of redelivered updates: each update is accepted exactly once, every retry answers with its seq. */
import { describe, expect, it } from 'vitest';
import type { IngestResult } from '../../src/protocol/index.js';
import { useProtocolFixture } from '../helpers/protocol-fixture.js';

const UPDATES = 1000;
const DELIVERIES = 3;
const CONVERSATIONS = 50;
const CONNECTIONS = 4;

/** Deterministic shuffle (mulberry32) so a failure can be replayed. */
function shuffle<T>(xs: T[], seed: number): T[] {
  let a = seed >>> 0;
  const rnd = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('ingest under a duplicate storm', () => {
  const fx = useProtocolFixture();

  describe(`when ${UPDATES} updates each arrive ${DELIVERIES}× at once over ${CONNECTIONS} connections`, () => {
    it('accepts each update once and answers every other delivery duplicate with the accepted seq', async () => {
      const dispatches = fx.connections(CONNECTIONS).map((c) => fx.dispatch({}, c));
      const conv = (u: number) => `telegram:c${u % CONVERSATIONS}`;
      const deliveries = shuffle(
        Array.from({ length: UPDATES * DELIVERIES }, (_, i) => i % UPDATES),
        20240601,
      );

      const results = await Promise.all(
        deliveries.map((u, i) => dispatches[i % CONNECTIONS]!.ingest(fx.message(`u${u}`, { conversationId: conv(u) })).then((r) => ({ u, r }))),
      );

      const perUpdate = new Map<number, IngestResult[]>();
      for (const { u, r } of results) perUpdate.set(u, [...(perUpdate.get(u) ?? []), r]);
      expect(perUpdate.size).toBe(UPDATES);

      let accepted = 0;
      let duplicates = 0;
      const acceptedSeq = new Map<number, number>();
      const problems: string[] = [];
      for (const [u, rs] of perUpdate) {
        const acc = rs.filter((r) => r.kind !== 'duplicate');
        const dup = rs.filter((r) => r.kind === 'duplicate');
        accepted += acc.length;
        duplicates += dup.length;
        if (acc.length !== 1) {
          problems.push(`update ${u}: ${acc.length} accepted deliveries`);
          continue;
        }
        acceptedSeq.set(u, acc[0]!.seq);
        for (const d of dup) if (d.seq !== acc[0]!.seq) problems.push(`update ${u}: duplicate seq ${d.seq} != accepted ${acc[0]!.seq}`);
      }
      expect(problems).toEqual([]);
      expect(accepted).toBe(UPDATES);
      expect(duplicates).toBe(UPDATES * (DELIVERIES - 1));
      const kinds = results.map(({ r }) => r.kind).filter((k) => k !== 'duplicate');
      expect(kinds.filter((k) => k === 'new-run')).toHaveLength(CONVERSATIONS);
      expect(kinds.filter((k) => k === 'joined')).toHaveLength(UPDATES - CONVERSATIONS);

      // The record holds exactly one message.received per update, at the seq its deliveries were told.
      let received = 0;
      for (let c = 0; c < CONVERSATIONS; c++) {
        const entries = (await fx.record(`telegram:c${c}`)).filter((e) => e.kind === 'message.received');
        received += entries.length;
        expect(entries).toHaveLength(UPDATES / CONVERSATIONS);
        for (const e of entries) {
          if (e.kind !== 'message.received') continue;
          const u = Number(e.updateKey.replace('telegram:u', ''));
          expect(u % CONVERSATIONS).toBe(c);
          expect(e.seq).toBe(acceptedSeq.get(u));
        }
      }
      expect(received).toBe(UPDATES);
    });
  });
});
