// @ts-nocheck — browser script (DOM), served as-is to the chat page; the project's TypeScript settings have no DOM types.
// Every text the page shows is set with textContent: user and model text is never parsed as HTML.
(() => {
  const base = document.body.dataset.base;
  const log = document.getElementById('log');
  const input = document.getElementById('text');
  const form = document.getElementById('composer');
  const conn = document.getElementById('conn');
  const typing = document.getElementById('typing');

  const randomId = () => {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return btoa(String.fromCharCode(...bytes))
      .replace(/\+/g, '-')
      .replace(/\//g, '_')
      .replace(/=+$/, '');
  };
  // The visitor's secret: sent with every request, never in a URL. The server names the conversation by an
  // id derived from it (logs, the console, file links), which does not lead back to it.
  let conversation = localStorage.getItem('steerbot.conversation');
  if (!conversation || !/^[A-Za-z0-9_-]{8,64}$/.test(conversation)) {
    conversation = randomId();
    localStorage.setItem('steerbot.conversation', conversation);
  }
  document.body.dataset.conversation = conversation;
  document.getElementById('new-chat').addEventListener('click', () => {
    localStorage.setItem('steerbot.conversation', randomId());
    location.reload();
  });

  const short = (run) => (run ? String(run).slice(0, 8) : '?');
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const stick = () => {
    log.scrollTop = log.scrollHeight;
  };
  const add = (node) => {
    const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.appendChild(node);
    if (atEnd) stick();
    return node;
  };

  /** A message bubble: `who` is me | bot. */
  const bubble = (who, id, text) => {
    const b = el('div', `msg ${who}`);
    if (id) b.dataset.id = id;
    b.appendChild(el('span', 'body', text));
    b.appendChild(el('span', 'meta'));
    return add(b);
  };
  const mine = (id) => (id ? log.querySelector(`.msg.me[data-id="${CSS.escape(id)}"]`) : null);
  const bySeq = (seq) => log.querySelector(`.msg.me[data-seq="${seq}"]`);
  const badge = (b, kind, text, run) => {
    if (!b) return;
    const meta = b.querySelector('.meta');
    meta.replaceChildren(el('span', `badge ${kind}`, text));
    b.dataset.dispatch = kind;
    if (run) b.dataset.run = run;
  };

  const DISPATCH = {
    'new-run': (r) => `new run ${short(r.runId)}`,
    joined: (r) => `joined queued run ${short(r.runId)}`,
    steered: (r) => `steered into the running answer (run ${short(r.runId)}, ${r.depth} waiting)`,
    pending: (r) => `queued after run ${short(r.runId)} (${r.reason}, ${r.depth} waiting)`,
    interrupting: (r) => `interrupting run ${short(r.runId)} (${r.stop})`,
    duplicate: () => 'already received',
    refused: (r) => `not answered: rate limit, retry in ${Math.ceil(r.retryAfterMs / 1000)} s`,
    purged: () => 'conversation deleted',
    command: (r) => `command /${r.command}`,
  };

  async function send(text) {
    const id = randomId();
    const b = bubble('me', id, text);
    badge(b, 'sending', 'sending…');
    stick();
    try {
      const res = await fetch(`${base}/api/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ conversation, id, text }),
        credentials: 'same-origin',
      });
      const r = await res.json().catch(() => ({}));
      if (!res.ok) {
        badge(b, 'error', `not sent: ${r.error || res.status}`);
        return;
      }
      if (r.seq) b.dataset.seq = String(r.seq);
      // A steered message may already have been taken by the run (its record event came first): keep that.
      if (b.dataset.dispatch === 'injected') return;
      badge(b, r.result, (DISPATCH[r.result] || (() => r.result))(r), r.runId);
    } catch (err) {
      badge(b, 'error', `not sent: ${err.message}`);
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    input.value = '';
    void send(text);
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });

  let typingTimer;
  const showTyping = (on) => {
    clearTimeout(typingTimer);
    typing.hidden = !on;
    if (on) typingTimer = setTimeout(() => (typing.hidden = true), 6000);
  };

  /** Disables a reply's buttons: a decision is sent once. */
  const disableButtons = (actions) => {
    for (const btn of actions.querySelectorAll('button')) btn.disabled = true;
    actions.dataset.state = 'sent';
  };

  /**
   * A reply's buttons (a tool approval's Approve / Deny, a question's options): a click sends the
   * button's command as an ordinary message, as if typed.
   */
  function addButtons(b, buttons) {
    const actions = el('div', 'actions');
    for (const btn of buttons) {
      if (typeof btn?.label !== 'string' || typeof btn?.command !== 'string') continue;
      const node = el('button', 'action', btn.label);
      node.type = 'button';
      node.dataset.command = btn.command;
      node.addEventListener('click', () => {
        if (node.disabled) return;
        disableButtons(actions);
        node.classList.add('chosen');
        void send(btn.command);
      });
      actions.appendChild(node);
    }
    if (actions.childElementCount) b.insertBefore(actions, b.querySelector('.meta'));
  }

  /**
   * A file the agent sent, inline under its caption: an image, an audio player (a spoken reply), or a
   * download link. Only a URL of this chat's file route is used; the name is text (alt, textContent).
   */
  function addFile(b, ev) {
    if (b.querySelector('.file') || typeof ev.url !== 'string' || !ev.url.startsWith(`${base}/files/`)) return;
    const name = typeof ev.name === 'string' ? ev.name : 'file';
    const box = el('div', `file ${ev.kind}`);
    box.dataset.kind = ev.kind;
    if (ev.voice) box.dataset.voice = 'true';
    if (ev.kind === 'image') {
      const img = el('img');
      img.alt = name;
      img.src = ev.url;
      box.appendChild(img);
    } else if (ev.kind === 'audio') {
      const audio = el('audio');
      audio.controls = true;
      audio.preload = 'metadata';
      audio.src = ev.url;
      audio.title = name;
      box.appendChild(audio);
    }
    const link = el('a', 'download', name);
    link.href = ev.url;
    link.download = name;
    box.appendChild(link);
    b.insertBefore(box, b.querySelector('.meta'));
  }

  /** A reply, a file, a streamed reply's progress, or typing. */
  function onReply(ev) {
    if (ev.type === 'typing') return showTyping(true);
    let b = log.querySelector(`.msg.bot[data-id="${CSS.escape(ev.id)}"]`);
    if (!b) {
      b = bubble('bot', ev.id, '');
      // Delivery keys are `<run id>:<answered seq>:<n>`; command replies have none.
      const run = ev.id.includes(':') ? ev.id.split(':')[0] : '';
      if (run) {
        b.dataset.run = run;
        b.querySelector('.meta').textContent = `run ${short(run)}`;
      }
    }
    if (ev.type === 'file') {
      b.querySelector('.body').textContent = ev.caption || '';
      addFile(b, ev);
      showTyping(false);
      return stick();
    }
    b.querySelector('.body').textContent = ev.text;
    if (ev.type === 'message' && Array.isArray(ev.buttons) && !b.querySelector('.actions')) addButtons(b, ev.buttons);
    b.classList.toggle('streaming', ev.type === 'edit');
    if (ev.type === 'message') showTyping(false);
    stick();
  }

  const line = (cls, text, data) => {
    const e = add(el('div', `event ${cls}`, text));
    for (const [k, v] of Object.entries(data || {})) e.dataset[k] = String(v);
    return e;
  };

  /** One record entry: dispatch audit, runs, tool calls. */
  // biome-ignore lint/complexity/noExcessiveCognitiveComplexity: the browser script handles each record kind in one switch; it is served as-is, without a build step to split modules
  function onRecord(r) {
    switch (r.kind) {
      case 'message.received': {
        const b = mine(r.messageId) || bubble('me', r.messageId, r.text);
        b.dataset.seq = String(r.seq);
        break;
      }
      case 'approval.decided':
        // Decided (here, elsewhere, before a reload, or timed out): its buttons stay disabled.
        for (const btn of log.querySelectorAll('.actions:not([data-state="sent"]) button'))
          if (btn.dataset.command?.endsWith(` ${r.approval}`)) disableButtons(btn.parentElement);
        line('run', `approval ${r.approval}: ${r.decision}`, { approval: r.approval, decision: r.decision });
        break;
      case 'question.answered':
        // Answered (a click here or elsewhere, a message, or nobody in time): its options stay disabled.
        for (const btn of log.querySelectorAll('.actions:not([data-state="sent"]) button'))
          if (btn.dataset.command?.startsWith(`/choose ${r.question} `)) disableButtons(btn.parentElement);
        line('run', `question ${r.question}: ${r.decision}`, { question: r.question, decision: r.decision });
        break;
      case 'steering.queued':
        for (const s of r.seqs)
          if (bySeq(s)?.dataset.dispatch !== 'injected') badge(bySeq(s), 'steered', `steered into the running answer (run ${short(r.run)})`, r.run);
        break;
      case 'steering.injected':
        for (const s of r.seqs) badge(bySeq(s), 'injected', `taken by run ${short(r.run)}${r.follow_up ? ' (follow-up)' : ''}`, r.run);
        break;
      case 'steering.requeued':
        for (const s of r.seqs) badge(bySeq(s), 'pending', `queued for the next run (run ${short(r.run)} ended first)`, r.run);
        break;
      case 'run.started':
        line('run', `run ${short(r.run)} started${r.attempt > 1 ? ` (attempt ${r.attempt})` : ''}`, { run: r.run, state: 'started' });
        showTyping(true);
        break;
      case 'run.ended':
        line('run', `run ${short(r.run)} ${r.outcome}${r.reason ? `: ${r.reason}` : ''}`, { run: r.run, outcome: r.outcome });
        showTyping(false);
        for (const b of log.querySelectorAll('.msg.bot.streaming')) b.classList.remove('streaming');
        for (const t of log.querySelectorAll('.event.tool.running')) {
          t.classList.remove('running');
          t.dataset.state = 'ended';
        }
        break;
      case 'run.control':
        line('run', `run ${short(r.run)}: ${r.control} requested`, { run: r.run });
        break;
      case 'tool.started':
        // The tools journal records a call before it runs: shown as running until its result is recorded.
        line('tool running', `running tool ${r.tool}…`, { run: r.run, tool: r.tool, call: r.call, state: 'running' });
        break;
      case 'tool.completed': {
        const running = log.querySelector(`.event.tool[data-call="${CSS.escape(r.call)}"]`);
        const done = running || line('tool', '', { run: r.run, tool: r.tool, call: r.call });
        done.classList.remove('running');
        done.textContent = `tool ${r.tool}: ${r.status}`;
        done.dataset.state = 'done';
        break;
      }
      case 'model.step':
        // Tool calls with their input (calls already shown from the journal keep their line).
        for (const t of r.tools || []) {
          const shown = [...log.querySelectorAll(`.event.tool[data-run="${CSS.escape(r.run)}"][data-tool="${CSS.escape(t.name)}"]`)].find(
            (e) => !e.dataset.input,
          );
          const node = shown || line('tool', '', { run: r.run, tool: t.name, state: 'done' });
          node.classList.remove('running');
          node.textContent = `tool ${t.name}(${t.input})`;
          node.dataset.input = t.input;
          node.dataset.state = 'done';
        }
        break;
      case 'compaction':
        line('run', `conversation compacted: ${r.tokensBefore} → ${r.tokensAfter} tokens`);
        break;
      case 'conversation.reset':
        line('run', 'new conversation: earlier messages are no longer part of the context');
        break;
      case 'unreadable':
        line('run', `record entry ${r.seq} cannot be shown by this version`);
        break;
    }
  }

  /**
   * The event stream, read with fetch rather than EventSource so the visitor's secret (it opens the
   * conversation) travels in a header: EventSource sends no header, so it would sit in the URL, and from
   * there in proxy access logs and the browser's history. Server-sent events are parsed here the way
   * EventSource does; when the stream ends or fails the page reconnects, resuming after the last event
   * id it saw (`Last-Event-ID`), waiting longer after each failure to reach the server.
   */
  const MAX_RETRY_MS = 30_000;
  /** Where the stream resumes, the wait before a reconnect (the server's `retry:`), failed attempts in a row. */
  const stream = { lastEventId: '', retryMs: 1000, failures: 0 };
  const showConn = (connected, text) => {
    conn.textContent = text;
    conn.className = connected ? 'conn ok' : 'conn';
    document.body.dataset.connected = String(connected);
  };
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  /** One event: `reply` or `record` (others are ignored, as EventSource ignores events with no listener); one that fails to show does not end the stream. */
  const show = (type, data) => {
    try {
      if (type === 'reply') onReply(JSON.parse(data));
      else if (type === 'record') onRecord(JSON.parse(data));
    } catch (err) {
      console.error('could not show a chat event', err);
    }
  };

  /** The event being read, field by field; a blank line dispatches it. An event cut off by a disconnect is dropped. */
  const sse = {
    type: '',
    data: [],
    id: '',
    reset() {
      this.type = '';
      this.data = [];
      this.id = stream.lastEventId;
    },
    line(line) {
      if (line === '') return this.dispatch();
      if (line.startsWith(':')) return; // a comment: the server's keep-alive
      const colon = line.indexOf(':');
      if (colon < 0) return this.field(line, '');
      this.field(line.slice(0, colon), line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1)));
    },
    field(name, value) {
      if (name === 'event') this.type = value;
      else if (name === 'data') this.data.push(value);
      else if (name === 'id' && !value.includes('\0')) this.id = value;
      else if (name === 'retry' && /^\d+$/.test(value)) stream.retryMs = Number(value);
    },
    dispatch() {
      stream.lastEventId = this.id;
      const { type, data } = this;
      this.type = '';
      this.data = [];
      if (data.length) show(type || 'message', data.join('\n'));
    },
  };

  /** Reads a stream's body to its end. */
  async function readEvents(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    sse.reset();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      // A CR at the end may be the first half of a CRLF: it stays in the buffer until the next piece.
      const lines = (buffer + value).split(/\r\n|\r(?!$)|\n/);
      buffer = lines.pop();
      for (const line of lines) sse.line(line);
    }
  }

  /**
   * One connection, read to its end. Returns the least wait before the next one (ms) and why it was
   * refused, if it was. A refusal is retried too, only later: in a rolling upgrade the next attempt may
   * reach another host, and a page left open keeps no stale answer.
   */
  async function connect() {
    const headers = { accept: 'text/event-stream', 'x-steerbot-conversation': conversation };
    if (stream.lastEventId) headers['last-event-id'] = stream.lastEventId;
    const res = await fetch(`${base}/api/events`, { headers, credentials: 'same-origin', cache: 'no-store' });
    if (res.ok && /^text\/event-stream/.test(res.headers.get('content-type') || '')) {
      showConn(true, 'connected');
      stream.failures = 0;
      await readEvents(res.body);
      return { wait: 0 };
    }
    stream.failures++;
    const r = await res.json().catch(() => ({}));
    return { wait: Number(res.headers.get('retry-after')) * 1000 || 0, refused: r.error || `HTTP ${res.status}` };
  }

  /** Keeps the stream open for the page's life, waiting longer after each failure in a row. */
  async function listen() {
    for (;;) {
      const { wait, refused } = await connect().catch(() => {
        stream.failures++;
        return { wait: 0 };
      });
      showConn(false, refused ? `reconnecting… (${refused})` : 'reconnecting…');
      const backoff = stream.retryMs * 2 ** Math.max(0, stream.failures - 1);
      await sleep(Math.min(MAX_RETRY_MS, Math.max(wait, backoff)));
    }
  }
  void listen();
  input.focus();
})();
