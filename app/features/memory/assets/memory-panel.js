// @ts-nocheck — browser script (DOM), served as-is to the console page; the project's TypeScript settings have no DOM types.
// The memory panel (app/features/memory/console-panel.ts). Every text is set with textContent, never parsed as HTML.
(() => {
  const base = document.body.dataset.base;
  const $ = (id) => document.getElementById(id);
  const result = (text) => ($('m-result').textContent = text);
  let identity = '';

  const call = async (method, path, body) => {
    const res = await fetch(`${base}/api${path}`, {
      method,
      credentials: 'same-origin',
      ...(body && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    const out = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(out.error || `HTTP ${res.status}`);
    return out;
  };

  function noteItem(n) {
    const li = document.createElement('li');
    const head = document.createElement('div');
    head.className = 'note';
    head.textContent = `#${n.id} · saved ${new Date(n.createdAt).toISOString()}${n.updatedAt !== n.createdAt ? ` · edited ${new Date(n.updatedAt).toISOString()}` : ''}`;
    const text = document.createElement('textarea');
    text.rows = 2;
    text.cols = 60;
    text.value = n.text;
    const save = document.createElement('button');
    save.type = 'button';
    save.textContent = 'save';
    save.addEventListener('click', () => void run(() => call('POST', '/memory/save', { identity, id: n.id, text: text.value }), `Saved note ${n.id}.`));
    const del = document.createElement('button');
    del.type = 'button';
    del.className = 'danger';
    del.textContent = 'delete';
    del.addEventListener('click', () => void run(() => call('POST', '/memory/delete', { identity, id: n.id }), `Deleted note ${n.id}.`));
    li.append(head, text, save, del);
    return li;
  }

  async function load() {
    const body = await call('GET', `/memory?${new URLSearchParams({ identity })}`);
    if (!body.enabled) {
      result('Memory is turned off (memory.enabled).');
      return;
    }
    $('m-notes').replaceChildren(...body.notes.map(noteItem));
    $('m-new').hidden = false;
    $('m-delete-all').hidden = body.notes.length === 0;
    if (!$('m-result').textContent) result(`${body.notes.length} of at most ${body.limits.maxNotes} notes.`);
  }

  /** Runs a change, then reloads; a refusal (400) is shown and nothing changed. */
  async function run(change, done) {
    try {
      await change();
      result(done);
    } catch (err) {
      result(`Refused: ${err.message}`);
    }
    await load().catch((err) => result(err.message));
  }

  $('m-form').addEventListener('submit', (e) => {
    e.preventDefault();
    identity = $('m-identity').value.trim();
    result('');
    if (identity) void load().catch((err) => result(err.message));
  });
  $('m-add').addEventListener('click', () => {
    const text = $('m-new-text').value;
    void run(() => call('POST', '/memory/save', { identity, text }), 'Saved.').then(() => {
      if ($('m-result').textContent === 'Saved.') $('m-new-text').value = '';
    });
  });
  $('m-delete-all').addEventListener('click', () => {
    if (confirm(`Delete every note of ${identity}?`)) void run(() => call('POST', '/memory/delete', { identity }), 'Deleted every note.');
  });
})();
