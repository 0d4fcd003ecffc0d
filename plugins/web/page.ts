/**
 * The chat page: a static HTML shell, its stylesheet, and the script in
 * `assets/chat.js` (read once at start; `tsc` emits it next to the compiled
 * module). Nothing is fetched from elsewhere; the page renders every text
 * it shows with `textContent`, never as HTML.
 */
import { readFileSync } from 'node:fs';
import { pages } from 'steerbot/plugin';

/** The page's script (browser JavaScript). */
export const CHAT_SCRIPT = readFileSync(new URL('./assets/chat.js', import.meta.url), 'utf8');

/** The page itself. `base` is the path prefix of the chat's routes (`/chat`). */
export function chatPage(base: string): string {
  return `${pages.pageHead('steerbot chat', base)}<header>
  <h1>steerbot</h1>
  <span id="conn" class="conn">connecting…</span>
  <span id="typing" class="typing" hidden>typing…</span>
  <button id="new-chat" type="button" title="Forget this conversation in this browser and start another">new chat</button>
</header>
<main id="log" aria-live="polite"></main>
<form id="composer" autocomplete="off">
  <textarea id="text" rows="2" placeholder="Message (Enter sends, Shift+Enter new line). Commands: /stop /new /compact /queue &lt;mode&gt; /status" aria-label="Message"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<footer id="hint">Messages you send while the bot works are steered into the running answer (or queued: see <code>/queue</code>).</footer>
</body>
</html>
`;
}

/** The page's stylesheet. */
export const CHAT_STYLES = `
:root { color-scheme: light dark; --bg: #f6f7f9; --fg: #1b1f24; --muted: #6a737d; --me: #d9ecff; --bot: #ffffff; --line: #d0d7de; --accent: #0969da; }
@media (prefers-color-scheme: dark) { :root { --bg: #0d1117; --fg: #e6edf3; --muted: #8b949e; --me: #143d66; --bot: #161b22; --line: #30363d; --accent: #4493f8; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); display: flex; flex-direction: column; height: 100vh; }
header { display: flex; align-items: center; gap: 12px; padding: 10px 16px; border-bottom: 1px solid var(--line); }
header h1 { font-size: 17px; margin: 0; }
.conn { font-size: 12px; color: var(--muted); }
.conn.ok { color: #1a7f37; }
.typing { font-size: 12px; color: var(--accent); }
header button { margin-left: auto; }
main { flex: 1; overflow-y: auto; padding: 16px; display: flex; flex-direction: column; gap: 8px; }
.msg { max-width: 75%; padding: 8px 12px; border-radius: 12px; border: 1px solid var(--line); white-space: pre-wrap; overflow-wrap: anywhere; }
.msg.me { align-self: flex-end; background: var(--me); }
.msg.bot { align-self: flex-start; background: var(--bot); }
.msg .meta { display: block; font-size: 11px; color: var(--muted); margin-top: 4px; white-space: normal; }
.msg.streaming .body::after { content: " ▍"; color: var(--accent); }
.msg .actions { display: flex; gap: 8px; margin-top: 8px; white-space: normal; }
.msg .actions button:disabled { opacity: 0.5; cursor: default; }
.msg .actions button.chosen { outline: 2px solid var(--accent); }
.msg .file { margin-top: 6px; white-space: normal; }
.msg .file img { display: block; max-width: 100%; max-height: 320px; border-radius: 8px; }
.msg .file audio { display: block; max-width: 100%; }
.msg .file a.download { display: block; font-size: 13px; margin-top: 4px; color: var(--accent); }
.event { align-self: center; font-size: 12px; color: var(--muted); }
.event.tool { font-family: ui-monospace, monospace; }
.event.tool.running { color: var(--accent); }
.badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; border: 1px solid var(--line); margin-left: 6px; }
.badge.steered { border-color: #bf8700; color: #bf8700; }
.badge.injected { border-color: #1a7f37; color: #1a7f37; }
.badge.interrupting, .badge.refused { border-color: #cf222e; color: #cf222e; }
form { display: flex; gap: 8px; padding: 10px 16px; border-top: 1px solid var(--line); }
textarea { flex: 1; resize: vertical; font: inherit; padding: 8px; border-radius: 8px; border: 1px solid var(--line); background: var(--bot); color: var(--fg); }
button { font: inherit; padding: 6px 14px; border-radius: 8px; border: 1px solid var(--line); background: var(--accent); color: #fff; cursor: pointer; }
header button { background: transparent; color: var(--fg); font-size: 12px; }
footer { font-size: 12px; color: var(--muted); padding: 0 16px 10px; }
`;
