/**
 * The console's run details and its `compact` action, over HTTP against the
 * whole app (host, runner with the local agent on the fake model, web chat).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publicConversationId } from '../../plugins/web/visitor-id.js';
import { waitFor } from '../../testing/wait.js';
import { redisUrl } from '../helpers/redis.js';
import { startWorld, type World } from './harness.js';

let world: World;
beforeAll(async () => {
  // One kept turn: two answered turns are enough for a manual compaction to cover one.
  world = await startWorld(redisUrl(), { STEERBOT_COMPACTION_KEEP_TURNS: '1' });
});
afterAll(async () => {
  await world?.stop();
});

type Entry = Record<string, any>;
const api = (path: string) => `${world.app.address}/console/api${path}`;
const conv = (id: string) => `/conversations/${encodeURIComponent(id)}`;
const entries = async (id: string): Promise<Entry[]> => ((await (await fetch(api(`${conv(id)}/entries?count=100`))).json()) as { entries: Entry[] }).entries;
const ofKind = async (id: string, kind: string) => (await entries(id)).filter((e) => e.kind === kind);
const action = (id: string, body: unknown, contentType = 'application/json') =>
  fetch(api(`${conv(id)}/actions`), { method: 'POST', headers: { 'content-type': contentType }, body: JSON.stringify(body) });

/** Sends a web chat message and waits until `n` runs of the conversation have ended. */
async function turn(conversation: string, id: string, text: string, n: number): Promise<void> {
  const res = await fetch(`${world.app.address}/chat/api/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ conversation, id, text }),
  });
  expect(res.status).toBe(200);
  await waitFor(async () => (await ofKind(publicConversationId(conversation), 'run.ended')).length >= n, 15_000, `${n} run(s) ended`);
}

describe('console run details', () => {
  it('shows one run: its hash, its attempts and end, and only its own delivery records', async () => {
    const id = publicConversationId('console-run-1');
    await turn('console-run-1', 'm1', 'first question', 1);
    await turn('console-run-1', 'm2', 'second question', 2);
    const [r1, r2] = (await ofKind(id, 'run.started')).map((e) => e.run as string);

    const res = await fetch(api(`${conv(id)}/runs/${r1}`));
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const detail = (await res.json()) as { run: Record<string, string>; attempts: Entry[]; ended: Entry[]; outbox: Array<{ key: string; record: Entry }> };
    expect(detail.run).toMatchObject({ id: r1, conversation: id, state: 'ended', outcome: 'completed' });
    expect(detail.attempts.map((e) => [e.kind, e.run])).toEqual([['run.started', r1]]);
    expect(detail.ended.map((e) => [e.kind, e.run, e.outcome])).toEqual([['run.ended', r1, 'completed']]);
    expect(detail.outbox.length).toBeGreaterThanOrEqual(1);
    for (const o of detail.outbox) {
      expect(o.key.startsWith(`${r1}:`)).toBe(true);
      expect(o.record).toMatchObject({ status: 'acknowledged' });
    }
    // The other run's records exist, and are not shown here.
    const other = (await (await fetch(api(`${conv(id)}/runs/${r2}`))).json()) as { outbox: Array<{ key: string }> };
    expect(other.outbox.length).toBeGreaterThanOrEqual(1);
    expect(other.outbox.every((o) => o.key.startsWith(`${r2}:`))).toBe(true);
  });

  it('answers 404 for a run that does not exist, or belongs to another conversation', async () => {
    await turn('console-run-2', 'm1', 'hello', 1);
    const [run] = (await ofKind(publicConversationId('console-run-2'), 'run.started')).map((e) => e.run as string);
    const missing = await fetch(api(`${conv(publicConversationId('console-run-2'))}/runs/rnosuchrun1`));
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: string }).error).toMatch(/no such run/);
    expect((await fetch(api(`${conv('web:console-run-other')}/runs/${run}`))).status).toBe(404);
  });
});

describe('console compact action', () => {
  it('on an idle conversation: recorded as the operator, a compaction run is enqueued and compacts the record', async () => {
    const id = publicConversationId('console-compact-1');
    await turn('console-compact-1', 'm1', 'first question', 1);
    await turn('console-compact-1', 'm2', 'second question', 2);

    const res = await action(id, { action: 'compact' });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { message: string }).message).toBe('Compacting the conversation.');
    const [command] = await ofKind(id, 'command.received');
    expect(command).toMatchObject({ command: '/compact', sender: { id: 'console' } });

    // The run it created is enqueued at once (not left to the reconciler), runs, and writes a compaction.
    const [compaction] = await waitFor(
      async () => {
        const c = await ofKind(id, 'compaction');
        return c.length > 0 && c;
      },
      15_000,
      'a compaction entry',
    );
    expect(compaction!.covers_until).toBeGreaterThan(0);
    await waitFor(async () => (await ofKind(id, 'run.ended')).length === 3, 15_000, 'the compaction run ended');
    const runs = (await ofKind(id, 'run.started')).map((e) => e.run as string);
    expect(runs).toHaveLength(3);
    const detail = (await (await fetch(api(`${conv(id)}/runs/${runs[2]}`))).json()) as { run: Record<string, string> };
    expect(detail.run).toMatchObject({ cause: 'compact', state: 'ended', outcome: 'completed' });
    expect(compaction!.run).toBe(runs[2]);
  });

  it('is refused unless sent as same-origin JSON, and writes nothing', async () => {
    const id = 'web:console-compact-2';
    const res = await action(id, { action: 'compact' }, 'text/plain');
    expect(res.status).toBe(403);
    expect(await entries(id)).toEqual([]);
  });
});
