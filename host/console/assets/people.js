// @ts-nocheck — browser script (DOM), served as-is to the console page; the project's TypeScript settings have no DOM types.
// The console's people panels: access (`#panel=access`) and one person (`#panel=person&id=<identity or account>`).
// Every text the page shows is set with textContent: ids, names and Redis text are never parsed as HTML.
(() => {
  const base = document.body.dataset.base;
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  };
  const time = (ms) => (ms ? new Date(ms).toLocaleString() : '');
  const num = (n) => (n === undefined || n === null ? '—' : Number(n).toLocaleString('en-US'));
  const api = async (path, body) => {
    const opts = body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
    const res = await fetch(`${base}/api${path}`, { credentials: 'same-origin', ...opts });
    const json = await res.json().catch(() => ({}));
    return { ok: res.ok, status: res.status, body: json };
  };
  const status = (text) => ($('status').textContent = text);
  const personLink = (id) => {
    const a = el('a', 'person-link', id);
    a.href = `#${new URLSearchParams({ panel: 'person', id })}`;
    return a;
  };
  const row = (cells, cls) => {
    const tr = el('tr', cls);
    for (const c of cells) {
      const td = el('td');
      if (c instanceof Node) td.appendChild(c);
      else td.textContent = c === undefined || c === null ? '' : String(c);
      tr.appendChild(td);
    }
    return tr;
  };
  const fill = (table, rows, empty) => table.querySelector('tbody').replaceChildren(...(rows.length ? rows : [row([empty], 'note')]));

  let panel;
  // Bumped by every route (a new panel or person): answers of an older one are dropped.
  let generation = 0;
  let personId;

  // ---- access: waiting codes, approved people with their usage, refusals ----
  async function loadAccess() {
    const gen = generation;
    const answers = await Promise.all([api('/access'), api('/people/usage')]);
    // An error (expired session, Redis down) is said as one, never shown as empty lists.
    const failed = answers.find((a) => !a.ok);
    if (failed) throw new Error(failed.body.error || `HTTP ${failed.status}`);
    // A newer route or look-up started meanwhile: this answer is stale.
    if (gen !== generation) return;
    const [{ body: access }, { body: usage }] = answers;
    fill(
      $('waiting'),
      (access.waiting || []).map((w) => {
        const tr = row([w.account, w.name || '', w.channel, w.conversationId, time(w.at), time(w.expiresAt)]);
        tr.dataset.account = w.account;
        return tr;
      }),
      'nobody waits',
    );
    const people = usage.people || [];
    $('usage-note').textContent = usage.counted
      ? `usage in the current UTC windows; the ${usage.max} first approved identities, most tokens this month first`
      : 'usage is counted only when budgets.identity sets a limit';
    fill(
      $('paired'),
      people.map((p) => {
        const tr = row([personLink(p.identity), num(p.usage?.tokensToday), num(p.usage?.tokensThisMonth), num(p.usage?.runsThisHour)]);
        tr.dataset.identity = p.identity;
        return tr;
      }),
      'nobody approved yet',
    );
    fill(
      $('refusals'),
      (access.refusals || []).map((r) => row([time(r.at), r.channel, r.chatId, r.userId, r.reason])),
      'no refusals',
    );
  }

  async function approve(e) {
    e.preventDefault();
    const code = $('pair-code').value.trim();
    if (!code) return;
    const res = await api('/access/pair', { code });
    const note = $('pair-result');
    note.dataset.ok = String(res.ok);
    note.textContent = res.ok ? `approved ${res.body.approved} (identity ${res.body.identity}); they were told` : res.body.error || `HTTP ${res.status}`;
    if (res.ok) $('pair-code').value = '';
    await refresh();
  }

  // ---- one person: accounts, link/unlink, usage against the limits, purge ----
  async function loadPerson() {
    const box = $('person');
    if (!personId) {
      box.hidden = true;
      return;
    }
    const gen = generation;
    const res = await api(`/people/person?${new URLSearchParams({ id: personId })}`);
    // A newer look-up started meanwhile: rendering this one would let link and purge act on the wrong person.
    if (gen !== generation) return;
    if (!res.ok) {
      box.hidden = true;
      $('p-result').textContent = res.body.error || `HTTP ${res.status}`;
      return;
    }
    const p = res.body;
    box.hidden = false;
    box.dataset.identity = p.identity;
    $('p-title').textContent = p.identity;
    $('p-export').href = `${base}/api/people/export?${new URLSearchParams({ id: p.identity })}`;
    const facts = [
      ['identity', p.identity],
      ['approved (pairing)', p.paired ? 'yes' : 'no'],
      ['linked accounts', p.linked ? String(p.accounts.length) : 'none'],
    ];
    if (p.query !== p.identity) facts.push(['looked up', p.query]);
    $('p-facts').replaceChildren(
      ...facts.map(([k, v]) => {
        const s = el('span');
        s.append(el('b', '', `${k}: `), v);
        return s;
      }),
    );
    $('p-facts').dataset.paired = String(p.paired);
    $('p-accounts').replaceChildren(...p.accounts.map((a) => accountItem(a, p.linked)));
    showUsage(p);
  }

  function accountItem(a, linked) {
    const li = el('li', '', `${a.account} · channel policy ${a.policy}${a.listed ? ', listed in users' : ''}`);
    li.dataset.account = a.account;
    if (linked) {
      const b = el('button', '', 'unlink');
      b.type = 'button';
      b.addEventListener(
        'click',
        () => void change('/access/unlink', { account: a.account }, (r) => (r.left ? `unlinked ${a.account} from ${r.left}` : `${a.account} was not linked`)),
      );
      li.append(' ', b);
    }
    return li;
  }

  function showUsage(p) {
    const rows = [
      ['tokens today', p.usage?.tokensToday, p.limits?.tokensPerDay, p.resets?.day],
      ['tokens this month', p.usage?.tokensThisMonth, p.limits?.tokensPerMonth, p.resets?.month],
      ['runs this hour', p.usage?.runsThisHour, p.limits?.runsPerHour, p.resets?.hour],
    ];
    const table = $('p-usage');
    table.dataset.counted = String(p.usage !== null);
    fill(
      table,
      p.usage === null
        ? []
        : rows.map(([label, used, limit, resets]) => {
            const tr = row([label, num(used), limit === undefined ? 'none' : num(limit), time(resets)]);
            tr.dataset.window = label;
            tr.dataset.used = String(used);
            return tr;
          }),
      'not counted: no budgets.identity limit is set',
    );
  }

  async function change(path, body, say) {
    const res = await api(path, body);
    $('p-result').textContent = res.ok ? say(res.body) : res.body.error || `HTTP ${res.status}`;
    $('p-result').dataset.ok = String(res.ok);
    await refresh();
  }

  async function link(e) {
    e.preventDefault();
    const account = $('link-account').value.trim();
    const to = $('person').dataset.identity;
    if (!account || !to) return;
    await change('/access/link', { account, to }, (r) =>
      r.kind === 'same' ? `${account} is in ${r.identity} already` : `linked ${account} into ${r.identity}`,
    );
    $('link-account').value = '';
  }

  async function purge() {
    const identity = $('person').dataset.identity;
    // Purge unlinks every account, withdraws the approval and deletes what is kept for the person (memory, usage): ask once.
    if (!identity || !window.confirm(`Purge ${identity}: unlink its accounts, withdraw its approval and delete its memory and usage?`)) return;
    await change('/access/purge', { identity }, (r) => `purged ${identity}${r.unlinked.length ? ` (unlinked ${r.unlinked.join(', ')})` : ''}`);
  }

  // ---- routing and polling ----
  let timer;
  async function refresh() {
    try {
      if (panel === 'access') await loadAccess();
      else if (panel === 'person') await loadPerson();
      else return;
      status(`updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      status(`error: ${err.message}`);
    }
  }
  function route() {
    const p = new URLSearchParams(location.hash.slice(1));
    panel = p.get('panel') || undefined;
    personId = p.get('id') || undefined;
    $('access-view').hidden = panel !== 'access';
    $('person-view').hidden = panel !== 'person';
    if (panel === 'person') {
      $('person-id').value = personId || '';
      $('p-result').textContent = '';
    }
    clearTimeout(timer);
    const mine = ++generation;
    if (!panel) return;
    const tick = async () => {
      await refresh();
      // A newer route started its own loop: this one ends.
      if (mine === generation) timer = setTimeout(tick, 2000);
    };
    void tick();
  }
  window.addEventListener('hashchange', route);
  $('pair-form').addEventListener('submit', (e) => void approve(e));
  $('link-form').addEventListener('submit', (e) => void link(e));
  $('p-purge').addEventListener('click', () => void purge());
  $('person-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = $('person-id').value.trim();
    if (!id) return;
    const hash = `#${new URLSearchParams({ panel: 'person', id })}`;
    // The same hash fires no hashchange: look the person up again.
    if (location.hash === hash) route();
    else location.hash = hash;
  });
  route();
})();
