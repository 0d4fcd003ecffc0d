/**
 * The console's memory panel: enter an identity, see its notes, edit,
 * add and delete them (through `/console/api/memory`). Its markup and
 * script stand apart from the rest of the page (`assets/memory-panel.js`,
 * served as `<base>/memory.js`): the memory feature adds it to the console.
 */
import { readFileSync } from 'node:fs';

/** The panel's script (browser JavaScript). */
export const MEMORY_PANEL_SCRIPT = readFileSync(new URL('./assets/memory-panel.js', import.meta.url), 'utf8');

/** The panel's markup; `base` is the console's path (`/console`). */
export function memoryPanel(base: string): string {
  return `<section id="memory-panel">
  <details>
    <summary><b>memory</b> <span class="note">what the bot remembers about a person</span></summary>
    <form id="m-form" class="actions">
      <label>identity <input id="m-identity" placeholder="channel:user id, or a linked identity" size="32"></label>
      <button type="submit">show notes</button>
      <button type="button" id="m-delete-all" class="danger" hidden>delete all</button>
      <span id="m-result" class="note"></span>
    </form>
    <ol id="m-notes" class="run"></ol>
    <div id="m-new" class="actions" hidden>
      <textarea id="m-new-text" rows="2" cols="60" placeholder="a new note"></textarea>
      <button type="button" id="m-add">add note</button>
    </div>
  </details>
</section>
<script src="${base}/memory.js" defer></script>
`;
}
