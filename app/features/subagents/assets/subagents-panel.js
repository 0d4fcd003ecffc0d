// @ts-nocheck — browser script (DOM), served as-is to the console page; the project's TypeScript settings have no DOM types.
// The run tree panel (app/features/subagents/console.ts). Every text is set with textContent, never parsed as HTML.
(() => {
  const base = document.body.dataset.base;
  const $ = (id) => document.getElementById(id);
  const link = (conversation, run) => `#${new URLSearchParams({ c: conversation, ...(run ? { r: run } : {}) })}`;
  const item = (text, href, cls) => {
    const li = document.createElement('li');
    if (cls) li.className = cls;
    if (href) {
      const a = document.createElement('a');
      a.href = href;
      a.textContent = text;
      li.append(a);
    } else li.textContent = text;
    return li;
  };

  async function show() {
    const p = new URLSearchParams(location.hash.slice(1));
    const conversation = p.get('c');
    const box = $('subagents-panel');
    if (!conversation || p.get('panel')) {
      box.hidden = true;
      return;
    }
    const q = new URLSearchParams({ conversation, ...(p.get('r') ? { run: p.get('r') } : {}) });
    const res = await fetch(`${base}/api/subagents?${q}`, { credentials: 'same-origin' }).catch(() => undefined);
    const body = res?.ok ? await res.json() : undefined;
    if (!body || (!body.parent && body.children.length === 0)) {
      box.hidden = true;
      return;
    }
    const items = [];
    if (body.parent)
      items.push(item(`↑ parent ${body.parent.conversation} (run ${body.parent.run})`, link(body.parent.conversation, body.parent.run), 'sa-parent'));
    for (const c of body.children) {
      const li = item(`${c.id} · ${c.status}${c.activeRun ? ` (run ${c.activeRun})` : ''}`, link(c.id, c.activeRun), 'sa-child');
      li.dataset.status = c.status;
      if (c.answer || c.reason) {
        const note = document.createElement('div');
        note.className = 'note';
        note.textContent = c.answer || c.reason;
        li.append(note);
      }
      items.push(li);
    }
    $('sa-tree').replaceChildren(...items);
    box.hidden = false;
  }

  window.addEventListener('hashchange', () => void show());
  void show();
})();
