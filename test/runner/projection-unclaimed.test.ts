import { describe, expect, it } from 'vitest';
import { projectHistory } from '../../runner/projection.js';
import type { SeqEntry } from '../../src/record/entries.js';

const at = 1_700_000_000_000;
const msg = (seq: number, text: string): SeqEntry => ({ v: 1, at, kind: 'message.received', updateKey: `t:${seq}`, sender: { id: 'u' }, text, seq });

describe('projectHistory › unclaimed messages', () => {
  // r1 took message 1; message 3 was steered into r1 but not pulled yet; message 5 waits in pending.
  const entries: SeqEntry[] = [
    msg(1, 'first'),
    { v: 1, at, kind: 'run.started', run: 'r1', attempt: 1, token: 1, owner: 'w', inputs: [1], seq: 2 },
    msg(3, 'steered, not pulled'),
    { v: 1, at, kind: 'steering.queued', run: 'r1', seqs: [3], seq: 4 },
    msg(5, 'pending'),
  ];

  it('leaves out messages no run has taken when asked to (the runtime pulls them later)', () => {
    const p = projectHistory(entries, { unclaimed: 'exclude' });
    expect(p.messages).toEqual([{ role: 'user', content: 'first' }]);
    expect(p.userSeqs).toEqual([1]);
  });

  it('projects them at their own seq by default', () => {
    expect(projectHistory(entries).userSeqs).toEqual([1, 3, 5]);
  });

  it('includes a message once the steering injection claims it, at the injection', () => {
    const claimed: SeqEntry[] = [...entries, { v: 1, at, kind: 'steering.injected', run: 'r1', seqs: [3], seq: 6 }];
    expect(projectHistory(claimed, { unclaimed: 'exclude' }).userSeqs).toEqual([1, 3]);
  });
});
