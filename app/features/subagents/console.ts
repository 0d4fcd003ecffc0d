/**
 * The console's run tree: `GET /console/api/subagents?conversation=…&run=…`
 * answers a run's children (each with where it stands and how its answer
 * begins) and, for a child's conversation, its parent; the panel
 * (`assets/subagents-panel.js`, served as `<base>/subagents.js`) draws it
 * under the conversation the page shows. Read from the run's set of children
 * and their records: nothing else is stored for it.
 */
import { readFileSync } from 'node:fs';
import type { ApiRoute, HostFeatureKit } from '../../../host/feature.js';
import { json } from '../../../src/http/routes.js';
import { readRange } from '../../../src/record/read.js';
import { conversationKeys } from '../../../src/redis/keys.js';
import { childrenKeys, childState, SUBAGENT_CHANNEL, taskParent } from './children.js';

/** The panel's script (browser JavaScript). */
const SCRIPT = readFileSync(new URL('./assets/subagents-panel.js', import.meta.url), 'utf8');

/** How much of a child's answer the tree shows, in characters. */
const EXCERPT_CHARS = 160;

const ID_RE = /^[A-Za-z0-9:._@+-]{1,256}$/;
const RUN_RE = /^r[A-Za-z0-9_-]{1,64}$/;

/** The panel: its markup and script. */
export const subagentsPanel = {
  name: 'subagents',
  html: (base: string) => `<section id="subagents-panel" hidden>
  <b>run tree</b> <span class="note">the subagents of the run shown, and a child's parent</span>
  <ul id="sa-tree" class="run"></ul>
</section>
<script src="${base}/subagents.js" defer></script>
`,
  script: SCRIPT,
};

/** Registers the run tree's API route. */
export function registerSubagentsApi(api: ApiRoute, kit: HostFeatureKit): void {
  api('GET', '/subagents', async (req) => {
    const conversation = req.query.conversation ?? '';
    if (!ID_RE.test(conversation)) return json(400, { error: 'expected ?conversation=<conversation id>' });
    const k = conversationKeys(kit.prefix, conversation);
    const run = req.query.run || (await kit.redis.get(k.active)) || undefined;
    if (run !== undefined && !RUN_RE.test(run)) return json(400, { error: 'expected &run=<run id>' });
    const [parent, children] = await Promise.all([parentOf(kit, conversation), run ? childrenOf(kit, conversation, run) : []]);
    return json(200, { conversation, ...(run && { run }), ...(parent && { parent }), children });
  });
}

/** A child conversation's parent: the conversation its task came from, and the run (named in the child's id). */
async function parentOf(kit: HostFeatureKit, conversation: string): Promise<{ conversation: string; run: string } | undefined> {
  if (!conversation.startsWith(`${SUBAGENT_CHANNEL}:`)) return undefined;
  const run = conversation.slice(SUBAGENT_CHANNEL.length + 1).split('.', 1)[0]!;
  const [task] = await readRange(kit.redis, conversationKeys(kit.prefix, conversation).log, { count: 1 });
  const from = taskParent(task);
  return from === undefined ? undefined : { conversation: from, run };
}

/** A run's children, in the order they were started, each with its status, active run and the start of its answer. */
async function childrenOf(kit: HostFeatureKit, conversation: string, run: string) {
  const ids = (await kit.redis.smembers(childrenKeys(kit.prefix, { conversationId: conversation, runId: run }).started)).sort(byPlace);
  return Promise.all(
    ids.map(async (id) => {
      const [{ result }, active] = await Promise.all([
        childState(kit.redis, kit.prefix, id, { answers: [], lastSeq: 0 }),
        kit.redis.get(conversationKeys(kit.prefix, id).active),
      ]);
      const answer = result.answer && result.answer.length > EXCERPT_CHARS ? `${result.answer.slice(0, EXCERPT_CHARS)}…` : result.answer;
      return { id, status: result.status, ...(active && { activeRun: active }), ...(answer && { answer }), ...(result.reason && { reason: result.reason }) };
    }),
  );
}

/** Children by call, then by their place in it (`….<n>`). */
const byPlace = (a: string, b: string) => {
  const [ca, na] = [a.slice(0, a.lastIndexOf('.')), Number(a.slice(a.lastIndexOf('.') + 1))];
  const [cb, nb] = [b.slice(0, b.lastIndexOf('.')), Number(b.slice(b.lastIndexOf('.') + 1))];
  return ca === cb ? na - nb : ca < cb ? -1 : 1;
};
