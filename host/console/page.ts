/**
 * The console page: a static HTML shell, its stylesheet, and the script in
 * `assets/console.js` (read once at start; `tsc` emits it next to the
 * compiled module). Nothing is fetched from elsewhere; every text from
 * users, models and Redis is rendered with `textContent`, never as HTML.
 */
import { readFileSync } from 'node:fs';
import { pageHead } from '../../src/http/page-shell.js';

/** The page's script (browser JavaScript). */
export const CONSOLE_SCRIPT = readFileSync(new URL('./assets/console.js', import.meta.url), 'utf8');

/** The people panels' script (browser JavaScript): access and one person. */
export const PEOPLE_SCRIPT = readFileSync(new URL('./assets/people.js', import.meta.url), 'utf8');

/** The page. `base` is the console's path (`/console`); `panels`: the features' panels' markup, added at its end. */
export function consolePage(base: string, panels: string): string {
  return `${pageHead('steerbot console', base)}<header>
  <h1><a href="#">steerbot console</a></h1>
  <nav><a href="#">conversations</a> <a href="#panel=access">access</a> <a href="#panel=person">people</a></nav>
  <span id="queue" class="queue" title="BullMQ jobs per state"></span>
  <span id="status" class="status"></span>
</header>
<section id="list-view">
  <form id="filters">
    <label>channel <input id="f-channel" placeholder="all (or a channel id)" size="28"></label>
    <label><input type="checkbox" id="f-stuck"> stuck only</label>
    <span id="list-note" class="note"></span>
  </form>
  <table id="conversations">
    <thead><tr><th>conversation</th><th>channel</th><th>last activity</th><th>active run</th><th>state</th><th>steering</th><th>pending</th><th>policy</th><th>breaker</th><th>last error</th><th>stuck</th></tr></thead>
    <tbody></tbody>
  </table>
  <div class="pager"><button id="prev" type="button">newer</button><button id="next" type="button">older</button></div>
</section>
<section id="conversation-view" hidden>
  <h2 id="c-title"></h2>
  <div id="c-status" class="facts"></div>
  <div id="c-actions" class="actions">
    <button type="button" data-action="stop">stop</button>
    <button type="button" data-action="compact">compact</button>
    <button type="button" data-action="new">new context</button>
    <label>policy <select id="c-policy"><option>default</option><option>steer</option><option>followup</option><option>collect</option><option>interrupt</option><option>supersede</option></select></label>
    <button type="button" data-action="policy">set policy</button>
    <a id="c-export" class="button" download title="everything stored for this conversation, as one JSON file">export</a>
    <button type="button" data-action="purge" class="danger">purge conversation</button>
    <button type="button" data-action="abandon" class="danger">abandon stuck run</button>
    <span id="c-result" class="note"></span>
  </div>
  <div id="schedules" class="run" hidden><b>schedules</b><ul id="schedule-list"></ul></div>
  <div id="run-view" class="run" hidden></div>
  <button id="older" type="button">older entries</button>
  <ol id="timeline"></ol>
</section>
${peopleSections()}
<script src="${base}/people.js" defer></script>
${panels}</body>
</html>
`;
}

/** The access and person panels (`assets/people.js` fills them; hash `#panel=access`, `#panel=person&id=<identity or account>`). */
function peopleSections(): string {
  return `<section id="access-view" hidden>
  <h2>access</h2>
  <form id="pair-form" class="actions">
    <label>pairing code <input id="pair-code" placeholder="K7QM-2XRD" size="12" autocomplete="off"></label>
    <button type="submit">approve</button>
    <span id="pair-result" class="note"></span>
  </form>
  <h3>waiting for approval</h3>
  <table id="waiting"><thead><tr><th>account</th><th>name</th><th>channel</th><th>conversation</th><th>asked</th><th>expires</th></tr></thead><tbody></tbody></table>
  <h3>approved people</h3>
  <p id="usage-note" class="note"></p>
  <table id="paired"><thead><tr><th>identity</th><th>tokens today</th><th>tokens this month</th><th>runs this hour</th></tr></thead><tbody></tbody></table>
  <h3>recent refusals</h3>
  <table id="refusals"><thead><tr><th>when</th><th>channel</th><th>chat</th><th>user</th><th>reason</th></tr></thead><tbody></tbody></table>
</section>
<section id="person-view" hidden>
  <form id="person-form" class="actions">
    <label>identity or account <input id="person-id" placeholder="channel:user id" size="32" autocomplete="off"></label>
    <button type="submit">look up</button>
  </form>
  <div id="person" hidden>
    <h2 id="p-title"></h2>
    <div id="p-facts" class="facts"></div>
    <h3>accounts</h3>
    <ul id="p-accounts"></ul>
    <form id="link-form" class="actions">
      <label>link account <input id="link-account" placeholder="channel:user id" size="28" autocomplete="off"></label>
      <button type="submit">link into this identity</button>
    </form>
    <h3>usage</h3>
    <table id="p-usage"><thead><tr><th>window</th><th>used</th><th>limit</th><th>resets</th></tr></thead><tbody></tbody></table>
    <!-- More per-person sections (memory, ...) go into #p-sections, each its own <div> filled by its own script. -->
    <div id="p-sections"></div>
    <div class="actions">
      <a id="p-export" class="button" download title="everything kept for this person and the conversations they wrote in, as one JSON file">export person</a>
      <button type="button" id="p-purge" class="danger">purge person</button>
    </div>
  </div>
  <p id="p-result" class="note"></p>
</section>`;
}

/** The page's stylesheet. */
export const CONSOLE_STYLES = `
:root { color-scheme: light dark; --bg: #f6f7f9; --fg: #1b1f24; --muted: #6a737d; --line: #d0d7de; --accent: #0969da; --bad: #cf222e; --warn: #bf8700; --good: #1a7f37; --card: #fff; }
@media (prefers-color-scheme: dark) { :root { --bg: #0d1117; --fg: #e6edf3; --muted: #8b949e; --line: #30363d; --accent: #4493f8; --card: #161b22; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
header { display: flex; gap: 16px; align-items: baseline; padding: 10px 16px; border-bottom: 1px solid var(--line); }
header nav a { margin-right: 10px; color: var(--accent); }
h3 { font-size: 13px; margin: 14px 0 6px; }
header h1 { font-size: 17px; margin: 0; } header h1 a { color: inherit; text-decoration: none; }
.queue, .status, .note { font-size: 12px; color: var(--muted); }
section { padding: 12px 16px; }
form#filters { display: flex; gap: 16px; align-items: center; margin-bottom: 8px; }
input, select, button { font: inherit; }
button { padding: 4px 10px; border-radius: 6px; border: 1px solid var(--line); background: var(--card); color: var(--fg); cursor: pointer; }
button.danger { border-color: var(--bad); color: var(--bad); }
a.button { padding: 4px 10px; border-radius: 6px; border: 1px solid var(--line); background: var(--card); color: var(--fg); text-decoration: none; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); font-size: 13px; vertical-align: top; }
td.id a { font-family: ui-monospace, monospace; }
td.stuck { color: var(--bad); }
.pager { margin-top: 8px; display: flex; gap: 8px; }
h2 { font-size: 15px; font-family: ui-monospace, monospace; margin: 0 0 8px; }
.facts { display: flex; flex-wrap: wrap; gap: 6px 18px; margin-bottom: 8px; }
.facts span b { font-weight: 600; }
.actions { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-bottom: 12px; }
.run { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; margin-bottom: 12px; }
.run pre { margin: 4px 0; white-space: pre-wrap; font-size: 12px; }
ol#timeline { list-style: none; padding: 0; margin: 8px 0; }
ol#timeline li { padding: 6px 10px; border-left: 3px solid var(--line); margin: 4px 0; background: var(--card); }
ol#timeline li .head { font-size: 12px; color: var(--muted); }
ol#timeline li .text { white-space: pre-wrap; overflow-wrap: anywhere; }
ol#timeline li.k-message-received { border-color: var(--accent); }
ol#timeline li.k-steering-queued, ol#timeline li.k-steering-injected { border-color: var(--warn); }
ol#timeline li.k-run-started, ol#timeline li.k-run-ended { border-color: var(--good); }
ol#timeline li.operator { border-color: var(--bad); }
.tool { font-family: ui-monospace, monospace; font-size: 12px; }
a.run-link { font-family: ui-monospace, monospace; }
`;
