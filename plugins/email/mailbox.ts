/**
 * The watched mailbox over one IMAP connection (`imapflow`): new mail is
 * fetched by UID after the stored cursor; with none, the connection waits in
 * IDLE until the server announces one (`EXISTS`), the wait runs out, or the
 * poll is aborted. A lost connection is opened again on the next round.
 */
import { ImapFlow, type MailboxObject, type MessageStructureObject } from 'imapflow';
import type { Logger } from 'steerbot/plugin';
import { imapError } from './errors.js';

/** Where the host stopped: the mailbox's UIDVALIDITY and the last UID handed over. */
export interface Cursor {
  validity: string;
  uid: number;
}

/** One mail fetched from the mailbox. `source` is absent when it is larger than `maxMessageBytes` (skipped). */
export interface FetchedMail {
  uid: number;
  source?: Buffer;
  structure?: MessageStructureObject;
}

/** One round: the mails after `after`, and the cursor once they are all handed over. */
export interface Round {
  validity: string;
  mails: FetchedMail[];
  /** The cursor after this round (also when `mails` is empty: a first start or a new UIDVALIDITY begins at the newest mail). */
  next: Cursor;
}

/** How to reach the mailbox. */
export interface ImapSettings {
  host: string;
  port: number;
  secure: boolean;
  user: string;
  password: string;
  mailbox: string;
  /** Connect and per-exchange timeout, in ms. */
  timeoutMs: number;
}

/** Most mails fetched in one round (the next round fetches the rest). */
const BATCH = 20;

/**
 * Opens a connection to the mailbox (selected). `idleMs`: the longest silence
 * expected from the server (a wait in IDLE), added to the socket timeout.
 * Throws EmailApiError.
 */
export async function openMailbox(s: ImapSettings, opts: { readOnly?: boolean; idleMs?: number } = {}): Promise<ImapFlow> {
  const client = new ImapFlow({
    host: s.host,
    port: s.port,
    secure: s.secure,
    auth: { user: s.user, pass: s.password },
    logger: false,
    disableAutoIdle: true,
    connectionTimeout: s.timeoutMs,
    greetingTimeout: s.timeoutMs,
    // A connection that stays silent longer than a wait in IDLE and an exchange is dead (a half-open TCP connection says nothing).
    socketTimeout: (opts.idleMs ?? 0) + s.timeoutMs,
  });
  // Without a listener an 'error' event would end the process; the failed call throws it anyway.
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.mailboxOpen(s.mailbox, { readOnly: opts.readOnly ?? false });
    return client;
  } catch (err) {
    client.close();
    throw imapError('connect', err, [s.password]);
  }
}

/** The watched mailbox of one host. */
export class MailboxWatcher {
  private client: ImapFlow | undefined;
  /** Counts the server's `EXISTS` announcements and closes, so a wait notices one that came while fetching. */
  private changes = 0;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly s: ImapSettings,
    private readonly o: { maxMessageBytes: number; idleRestartMs: number; logger: Logger },
  ) {}

  /** The mails after `cursor` (none on a first start), or none after waiting for one. Throws EmailApiError. */
  async poll(cursor: Cursor | null, signal: AbortSignal): Promise<Round> {
    const client = await this.connected();
    const box = client.mailbox as MailboxObject;
    const validity = String(box.uidValidity);
    if (cursor === null || cursor.validity !== validity) {
      // Mail from before the bot listened (or under old UIDs) is history: the newest mail is where it starts.
      if (cursor !== null) this.o.logger.warn({ mailbox: this.s.mailbox }, 'email mailbox UIDVALIDITY changed; starting after its newest mail');
      return { validity, mails: [], next: { validity, uid: box.uidNext - 1 } };
    }
    const seen = this.changes;
    const mails = await this.fetchAfter(client, cursor.uid);
    if (mails.length === 0 && this.changes === seen) await this.waitForChange(client, signal);
    return { validity, mails, next: { validity, uid: mails.at(-1)?.uid ?? cursor.uid } };
  }

  /** Closes the connection. Never throws. */
  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const wake of this.waiters) wake();
    if (client?.usable) await client.logout().catch(() => client.close());
    else client?.close();
  }

  private async connected(): Promise<ImapFlow> {
    if (this.client?.usable) return this.client;
    this.client?.close();
    this.client = undefined;
    const client = await openMailbox(this.s, { idleMs: this.o.idleRestartMs });
    const wake = () => {
      this.changes++;
      for (const w of this.waiters) w();
    };
    client.on('exists', wake);
    client.on('close', wake);
    this.client = client;
    return client;
  }

  private async fetchAfter(client: ImapFlow, after: number): Promise<FetchedMail[]> {
    try {
      if ((client.mailbox as MailboxObject).exists === 0) return [];
      // `N:*` names the newest mail even when its UID is below N: filtered.
      const listed = await client.fetchAll(`${after + 1}:*`, { uid: true, size: true }, { uid: true });
      const fresh = listed.filter((m) => m.uid > after).sort((a, b) => a.uid - b.uid);
      const mails: FetchedMail[] = [];
      for (const m of fresh.slice(0, BATCH)) {
        if ((m.size ?? 0) > this.o.maxMessageBytes) {
          this.o.logger.warn({ uid: m.uid, size: m.size }, 'email larger than maxMessageBytes; skipped');
          mails.push({ uid: m.uid });
          continue;
        }
        const full = await client.fetchOne(String(m.uid), { uid: true, source: true, bodyStructure: true }, { uid: true });
        if (!full) continue; // expunged meanwhile
        mails.push({ uid: m.uid, ...(full.source && { source: full.source }), ...(full.bodyStructure && { structure: full.bodyStructure }) });
      }
      return mails;
    } catch (err) {
      throw imapError('fetch', err, [this.s.password]);
    }
  }

  /** Waits in IDLE for an announcement, the restart time, a closed connection or `signal`. */
  private async waitForChange(client: ImapFlow, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const seen = this.changes;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, this.o.idleRestartMs);
      signal.addEventListener('abort', done, { once: true });
      this.waiters.add(done);
      if (this.changes !== seen) done();
      // IDLE lasts until the next command (the next round's fetch) ends it.
      else client.idle({ whenFree: true }).catch((err: unknown) => this.o.logger.debug({ err: imapError('idle', err, [this.s.password]) }, 'email IDLE ended'));
    });
  }
}
