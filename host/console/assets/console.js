// @ts-nocheck — browser script (DOM), served as-is to the console page; the project's TypeScript settings have no DOM types.
// Every text the page shows is set with textContent: user, model and Redis text is never parsed as HTML.
(() => {
  const base = document.body.dataset.base;
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  };
  const ago = (ms, now) => {
    if (!ms) return '';
    const s = Math.max(0, Math.round(((now || Date.now()) - ms) / 1000));
    return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.floor(s / 60)}m ago` : `${Math.floor(s / 3600)}h ago`;
  };
  const api = async (path, opts) => {
    const res = await fetch(`${base}/api${path}`, { credentials: 'same-origin', ...opts });
    const body = await res.json().catch(() => ({}));
    if (!res.ok && res.status !== 409) throw new Error(body.error || `HTTP ${res.status}`);
    return { status: res.status, body };
  };
  const status = (text) => ($('status').textContent = text);

  let offset = 0;
  const LIMIT = 50;
  let view = { conversation: undefined, run: undefined };
  let lastSeq = 0;
  let firstSeq = 0;

  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    // `#panel=…` is a panel of people.js (access, person): this script's views stay hidden and idle.
    view = { conversation: p.get('c') || undefined, run: p.get('r') || undefined, panel: p.get('panel') || undefined };
  }
  const link = (conversation, run) => `#${new URLSearchParams({ c: conversation, ...(run ? { r: run } : {}) })}`;

  // ---- conversations list ----
  async function loadList() {
    const q = new URLSearchParams({ offset: String(offset), limit: String(LIMIT) });
    const channel = $('f-channel').value.trim();
    if (channel) q.set('channel', channel);
    if ($('f-stuck').checked) q.set('stuck', '1');
    const { body } = await api(`/conversations?${q}`);
    showQueue(body.queue);
    const tbody = $('conversations').querySelector('tbody');
    const rows = body.rows.map((r) => {
      const tr = el('tr');
      tr.dataset.conversation = r.id;
      const id = el('td', 'id');
      const a = el('a', '', r.id);
      a.href = link(r.id);
      id.appendChild(a);
      tr.appendChild(id);
      const cells = [
        r.channel,
        ago(r.lastActivityMs, body.now),
        r.activeRunId || '',
        r.runState ? `${r.runState}${r.stop ? ` (stop: ${r.stop})` : ''}` : 'idle',
        r.steeringDepth,
        r.pendingDepth,
        r.policyOverride ? `${r.policy} (override)` : r.policy,
        r.breakerOpen ? 'open' : 'closed',
        r.lastError || '',
      ];
      const names = ['channel', 'activity', 'run', 'state', 'steering', 'pending', 'policy', 'breaker', 'error'];
      cells.forEach((c, i) => {
        const td = el('td', names[i], c);
        tr.appendChild(td);
      });
      tr.appendChild(el('td', 'stuck', r.stuck.join(', ')));
      return tr;
    });
    tbody.replaceChildren(...rows);
    $('list-note').textContent = body.filtered
      ? `filtered: looked at the ${body.scanned} most recent of ${body.total} conversations (at most ${body.filterWindow})`
      : `${body.total} conversations with recent activity`;
    $('prev').disabled = offset === 0;
    $('next').disabled = body.rows.length < LIMIT;
  }

  function showQueue(q) {
    if (!q) return;
    $('queue').textContent = `queue: ${Object.entries(q)
      .map(([k, v]) => `${k} ${v}`)
      .join(' · ')}`;
  }

  // ---- one conversation ----
  function fact(label, value) {
    const s = el('span');
    s.appendChild(el('b', '', `${label}: `));
    s.appendChild(document.createTextNode(value === undefined || value === '' ? '—' : String(value)));
    return s;
  }

  async function loadConversation() {
    const id = view.conversation;
    const { body } = await api(`/conversations/${encodeURIComponent(id)}`);
    const r = body.row;
    $('c-title').textContent = id;
    const box = $('c-status');
    const run = r.activeRunId ? el('a', 'run-link', r.activeRunId) : undefined;
    if (run) run.href = link(id, r.activeRunId);
    const runFact = fact('active run', 'none');
    if (run) runFact.replaceChildren(el('b', '', 'active run: '), run);
    box.replaceChildren(
      runFact,
      fact('state', r.runState ? `${r.runState}${r.stop ? ` (stop: ${r.stop})` : ''}` : 'idle'),
      fact('attempt', r.attempt || ''),
      fact('owner', r.owner),
      fact('lease', r.leaseUntilMs ? (r.leaseUntilMs > body.now ? `${Math.ceil((r.leaseUntilMs - body.now) / 1000)} s left` : 'expired') : ''),
      fact('steering depth', r.steeringDepth),
      fact('pending depth', r.pendingDepth),
      fact('policy', r.policyOverride ? `${r.policy} (override)` : r.policy),
      fact('breaker', r.breakerOpen ? 'open' : 'closed'),
      fact('last error', r.lastError),
      fact('stuck', r.stuck.join(', ')),
    );
    box.dataset.activeRun = r.activeRunId || '';
    box.dataset.state = r.runState || 'idle';
    box.dataset.steering = String(r.steeringDepth);
  }

  // The operator's own actions carry the console's update key (`console:<uuid>`): a channel's update keys start with
  // its channel id, so no sender can make an entry of theirs read as the operator's, whatever id or name they have.
  const byOperator = (e) => typeof e.updateKey === 'string' && e.updateKey.startsWith('console:');
  // A sender by the id their platform gave them, first, and the display name they chose after it: two people (or a
  // person and the operator) may share a name, never an id.
  const who = (s) => (s.name && s.name !== s.id ? `${s.id} “${s.name}”` : s.id);

  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the browser script renders each record kind in one switch; it is served as-is, without a build step to split modules
  function entryText(e) {
    switch (e.kind) {
      case 'message.received':
        return { head: `message from ${who(e.sender)}`, text: e.text };
      case 'message.refused':
        return { head: `message refused (${e.limit} rate limit) from ${who(e.message.sender)}`, text: e.message.text };
      case 'command.received':
        return {
          head: `command ${e.command}${e.args ? ` ${e.args}` : ''} by ${byOperator(e) ? 'operator (console)' : who(e.sender)}`,
          operator: byOperator(e),
        };
      case 'steering.queued':
        return { head: `steering queued for run ${e.run}: messages ${e.seqs.join(', ')}` };
      case 'steering.injected':
        return { head: `steering injected into run ${e.run}${e.follow_up ? ' (handed back at finish)' : ''}: messages ${e.seqs.join(', ')}` };
      case 'steering.requeued':
        return { head: `steering requeued from run ${e.run}: messages ${e.seqs.join(', ')}` };
      case 'steering.overflow':
        return { head: `steering overflow on run ${e.run} (cap ${e.cap}): messages ${e.seqs.join(', ')} pending` };
      case 'run.control':
        return { head: `${e.control} requested for run ${e.run}` };
      case 'run.started':
        return {
          head: `run ${e.run} started: attempt ${e.attempt}, owner ${e.owner}, fencing token ${e.token}${e.inputs ? `, inputs ${e.inputs.join(', ')}` : ''}`,
        };
      case 'run.ended':
        return {
          head: `run ${e.run} ended ${e.outcome}${e.reason ? `: ${e.reason}` : ''} (attempt ${e.attempt}, token ${e.token})`,
          operator: (e.reason || '').startsWith('abandoned by operator'),
        };
      case 'model.step': {
        const parts = [];
        for (const m of e.messages) {
          for (const p of Array.isArray(m.content) ? m.content : [{ type: 'text', text: String(m.content) }]) {
            if (p.type === 'text' && p.text) parts.push(p.text);
            else if (p.type === 'tool-call') parts.push(`→ tool ${p.toolName}(${JSON.stringify(p.input ?? p.args ?? {})})`);
            else if (p.type === 'tool-result') parts.push(`← ${p.toolName}: ${JSON.stringify(p.output ?? p.result ?? '').slice(0, 300)}`);
          }
        }
        const usage = e.usage ? ` · tokens in ${e.usage.inputTokens ?? '?'} out ${e.usage.outputTokens ?? '?'}` : '';
        return { head: `model step ${e.step} of run ${e.run}${e.partial ? ' (cut off)' : ''} · ${e.finishReason || ''}${usage}`, text: parts.join('\n') };
      }
      case 'tool.started':
        return {
          head: `tool ${e.tool} started (call ${e.call}, run ${e.run}${e.idempotent ? ', idempotent' : ''}${e.supersedes ? `, re-runs ${e.supersedes}` : ''})`,
        };
      case 'tool.completed':
        return { head: `tool ${e.tool} ${e.status} (call ${e.call}, run ${e.run})`, text: JSON.stringify(e.output ?? '').slice(0, 500) };
      case 'compaction':
        return { head: `compaction checkpoint: covers up to ${e.covers_until}, tokens ${e.tokens_before} → ${e.tokens_after} (${e.summarizer})` };
      case 'conversation.reset':
        return {
          head: `new context${byOperator(e) ? ' by operator (console)' : e.sender ? ` by ${who(e.sender)}` : ''}`,
          operator: byOperator(e),
        };
      default:
        return { head: e.kind };
    }
  }

  function entryNode(e) {
    const t = entryText(e);
    const li = el('li', `k-${e.kind.replace('.', '-')}${t.operator ? ' operator' : ''}`);
    li.dataset.seq = String(e.seq);
    li.dataset.kind = e.kind;
    if (e.run) li.dataset.run = e.run;
    const head = el('div', 'head', `#${e.seq} · ${new Date(e.at).toLocaleTimeString()} · ${t.head}`);
    li.appendChild(head);
    if (e.run) {
      const a = el('a', 'run-link', 'run details');
      a.href = link(view.conversation, e.run);
      head.appendChild(document.createTextNode(' · '));
      head.appendChild(a);
    }
    if (t.text) li.appendChild(el('div', 'text', t.text));
    return li;
  }

  async function loadTimeline(reset) {
    const id = encodeURIComponent(view.conversation);
    const ol = $('timeline');
    if (reset) {
      const { body } = await api(`/conversations/${id}/entries?count=50`);
      ol.replaceChildren(...body.entries.map(entryNode));
      firstSeq = body.entries[0]?.seq || 0;
      lastSeq = body.entries.at(-1)?.seq || 0;
      $('older').hidden = firstSeq <= 1;
      return;
    }
    const { body } = await api(`/conversations/${id}/entries?after=${lastSeq}&count=200`);
    for (const e of body.entries) ol.appendChild(entryNode(e));
    if (body.entries.length) lastSeq = body.entries.at(-1).seq;
  }

  async function loadOlder() {
    const { body } = await api(`/conversations/${encodeURIComponent(view.conversation)}/entries?before=${firstSeq}&count=50`);
    $('timeline').prepend(...body.entries.map(entryNode));
    if (body.entries.length) firstSeq = body.entries[0].seq;
    $('older').hidden = body.entries.length === 0 || firstSeq <= 1;
  }

  async function loadRun() {
    const box = $('run-view');
    if (!view.run) {
      box.hidden = true;
      return;
    }
    const { status: code, body } = await api(`/conversations/${encodeURIComponent(view.conversation)}/runs/${encodeURIComponent(view.run)}`).catch((err) => ({
      body: { error: err.message },
    }));
    box.hidden = false;
    if (body.error || code === 404) {
      box.replaceChildren(el('div', '', `run ${view.run}: ${body.error || 'not found'}`));
      return;
    }
    const r = body.run;
    const trace = body.traceLink ? el('a', '', body.traceId) : el('span', '', body.traceId || 'not sampled');
    if (body.traceLink) trace.href = body.traceLink;
    const traceFact = fact('trace', '');
    traceFact.replaceChildren(el('b', '', 'trace: '), trace);
    const facts = el('div', 'facts');
    facts.append(
      fact('run', r.id),
      fact('state', r.state),
      fact('outcome', r.outcome),
      fact('reason', r.reason),
      fact('cause', r.cause),
      fact('attempt', r.attempt),
      fact('fencing token', r.token),
      fact('owner', r.owner),
      fact('lease until', r.lease_until ? new Date(Number(r.lease_until)).toLocaleTimeString() : ''),
      fact('stop', r.stop),
      traceFact,
    );
    box.dataset.state = r.state;
    box.dataset.outcome = r.outcome || '';
    const attempts = el(
      'pre',
      '',
      body.attempts.map((a) => `attempt ${a.attempt}: owner ${a.owner}, token ${a.token}, at ${new Date(a.at).toLocaleTimeString()}`).join('\n') ||
        'no attempts in the recent record',
    );
    const outbox = el(
      'pre',
      '',
      body.outbox
        .map((o) => `${o.key}: ${o.record.status || JSON.stringify(o.record)}${o.record.messageId ? ` (message ${o.record.messageId})` : ''}`)
        .join('\n') || 'no outbox entries',
    );
    box.replaceChildren(el('b', '', 'run'), facts, el('b', '', 'attempts'), attempts, el('b', '', 'outbox'), outbox);
  }

  // ---- schedules ----
  async function loadSchedules() {
    const id = view.conversation;
    const { body } = await api(`/conversations/${encodeURIComponent(id)}/schedules`);
    const box = $('schedules');
    box.hidden = !body.enabled;
    const items = body.schedules.map((s) => {
      const li = el(
        'li',
        '',
        `${s.id}${s.origin === 'heartbeat' ? ' (heartbeat)' : ''} · ${describeWhen(s.when)} · next ${s.next.length ? s.next.map((t) => new Date(t).toISOString()).join(', ') : 'none'} · ${s.prompt}`,
      );
      const cancel = el('button', 'danger', 'cancel');
      cancel.type = 'button';
      cancel.dataset.schedule = s.id;
      cancel.addEventListener('click', () => void cancelSchedule(s.id));
      li.append(' ', cancel);
      return li;
    });
    $('schedule-list').replaceChildren(...(items.length ? items : [el('li', 'note', 'none')]));
  }
  function describeWhen(w) {
    if (w.kind === 'once') return `once at ${new Date(w.at).toISOString()}`;
    if (w.kind === 'cron') return `cron ${w.cron} (${w.tz})`;
    return `every ${Math.round(w.everyMs / 1000)} s`;
  }
  async function cancelSchedule(scheduleId) {
    const res = await api(`/conversations/${encodeURIComponent(view.conversation)}/schedules/${encodeURIComponent(scheduleId)}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }).catch((err) => ({ body: { ok: false, message: err.message } }));
    $('c-result').textContent = res.body.message || res.body.error || '';
    await refresh();
  }

  async function act(action) {
    // Purge deletes the conversation's record and state for good (stopping its run first): ask once.
    if (action === 'purge' && !window.confirm('Delete everything stored for this conversation (its run is stopped first)?')) return;
    const arg = action === 'policy' ? $('c-policy').value : action === 'abandon' ? $('c-status').dataset.activeRun : action === 'purge' ? 'stop' : undefined;
    const res = await api(`/conversations/${encodeURIComponent(view.conversation)}/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ action, ...(arg ? { arg } : {}) }),
    }).catch((err) => ({ body: { ok: false, message: err.message } }));
    const note = $('c-result');
    note.textContent = res.body.message || res.body.error || '';
    note.dataset.ok = String(res.body.ok === true);
    await refresh();
  }

  // ---- routing and polling ----
  let timer;
  async function refresh() {
    if (view.panel) return;
    try {
      if (view.conversation) {
        await Promise.all([loadConversation(), loadTimeline(false), loadRun(), loadSchedules()]);
        const { body } = await api('/queue');
        showQueue(body);
      } else {
        await loadList();
      }
      status(`updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      status(`error: ${err.message}`);
    }
  }
  async function route() {
    readHash();
    $('list-view').hidden = !!view.conversation || !!view.panel;
    $('conversation-view').hidden = !view.conversation || !!view.panel;
    if (view.conversation) {
      $('c-result').textContent = '';
      // A plain link: the browser downloads it with the login cookie (same origin), the route streams it. Set as the
      // view opens, before anything of it loads, so it works as soon as it shows.
      $('c-export').href = `${base}/api/conversations/${encodeURIComponent(view.conversation)}/export`;
      await loadTimeline(true).catch((err) => status(`error: ${err.message}`));
    }
    await refresh();
  }
  window.addEventListener('hashchange', () => void route());
  $('f-channel').addEventListener('change', () => {
    offset = 0;
    void refresh();
  });
  $('f-stuck').addEventListener('change', () => {
    offset = 0;
    void refresh();
  });
  $('filters').addEventListener('submit', (e) => e.preventDefault());
  $('prev').addEventListener('click', () => {
    offset = Math.max(0, offset - LIMIT);
    void refresh();
  });
  $('next').addEventListener('click', () => {
    offset += LIMIT;
    void refresh();
  });
  $('older').addEventListener('click', () => void loadOlder());
  for (const b of document.querySelectorAll('#c-actions button[data-action]')) b.addEventListener('click', () => void act(b.dataset.action));
  const tick = async () => {
    await refresh();
    timer = setTimeout(tick, 1000);
  };
  void route().then(() => {
    clearTimeout(timer);
    timer = setTimeout(tick, 1000);
  });
})();
