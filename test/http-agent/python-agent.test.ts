/**
 * The minimal Python agent (examples/http-agent/agent.py, also printed in
 * docs/external-agents.md) speaks the same protocol as the Node example: run
 * by `python3`, driven by the http-agent plugin through the real runtime, it
 * answers, takes a message steered in mid-run through the run endpoint,
 * writes state, and refuses unsigned requests.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { STATE_KEY } from '../../plugins/http-agent/invocation.js';
import { ConversationState } from '../../src/protocol/state.js';
import { CID } from '../../testing/runner-harness.js';
import { type AgentRig, SECRET, startRig } from './helpers.js';

const AGENT = 'examples/http-agent/agent.py';

let proc: ChildProcess;
let url: string;
let rig: AgentRig | undefined;

/** Starts the agent on a port of its own choosing; resolves with that port, rejects with its stderr when it exits first. */
function startAgent(): Promise<string> {
  proc = spawn('python3', [AGENT], { env: { ...process.env, STEERBOT_AGENT_SECRET: SECRET, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`python agent not listening within 10 s: ${err}`)), 10_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on port (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`python agent exited (${code}): ${err}`));
    });
  });
}

beforeEach(async () => {
  // Python's server binds port 0 with SO_REUSEADDR, so the kernel may hand it a port another process's socket has
  // bound and not yet listens on; its listen then fails with EADDRINUSE. Another port is asked for, twice at most.
  for (let attempt = 1; ; attempt++) {
    try {
      url = `http://127.0.0.1:${await startAgent()}/`;
      return;
    } catch (err) {
      if (attempt === 3 || !String(err).includes('Address already in use')) throw err;
    }
  }
});
afterEach(async () => {
  await rig?.close();
  rig = undefined;
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGKILL');
  await exited;
});

describe('the minimal Python agent', () => {
  it('answers through the runner, with a message steered in mid-run taken at its pull, and keeps its state', async () => {
    rig = await startRig({ url });
    const release = rig.probe.holdNextInvocation();
    const first = await rig.h.ingest('hello python');
    expect(first.kind).toBe('new-run');
    const runId = (first as { runId: string }).runId;
    await rig.probe.waitForInvocations(1);
    const steered = await rig.h.ingest('and a steered one');
    expect(steered).toMatchObject({ kind: 'steered', runId });
    release();

    expect((await rig.h.runEnded(runId)).outcome).toBe('completed');
    await rig.h.idle();
    expect(rig.h.outbound.texts).toEqual(['python agent heard: hello python / and a steered one']);
    expect(rig.probe.of(runId).flatMap((i) => i.pulled)).toEqual([steered.seq]);
    expect(await new ConversationState({ client: rig.h.ctx.redis, prefix: rig.h.prefix }).get(CID, STATE_KEY)).toEqual({ turns: 1 });
    expect((await rig.h.entries('model.step')).map((s) => s.finishReason)).toEqual(['stop']);
  });

  it('refuses a request without a valid signature', async () => {
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-steerbot-timestamp': String(Math.floor(Date.now() / 1000)),
        'x-steerbot-signature': `sha256=${'0'.repeat(64)}`,
      },
      body: '{"type":"run"}',
    });
    expect(res.status).toBe(401);
  });

  it('is the agent docs/external-agents.md shows', () => {
    const doc = readFileSync('docs/external-agents.md', 'utf8');
    const block = /```python\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(block).toBe(readFileSync(AGENT, 'utf8'));
  });
});
