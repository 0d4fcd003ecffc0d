/**
 * Real local mail servers for email tests: a private dovecot (IMAP) and a
 * private OpenSMTPD (SMTP) on free 127.0.0.1 ports, configured from a temp
 * directory and stopped with it. Users `bot` and `alice` (passwd-file, plain
 * passwords, maildirs under the temp dir) at `example.test`; SMTP accepts
 * mail for those two from anyone on 127.0.0.1 and delivers it into their
 * maildirs, which IMAP serves. No TLS.
 *
 * OpenSMTPD keeps its queue (`/var/spool/smtpd`) and control socket
 * (`/var/run/smtpd.sock`) at compiled-in paths, so it runs in a mount
 * namespace of its own (`unshare --mount`, root) where both are the temp
 * dir's: two instances never share them and nothing outside is touched.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, chmodSync, chownSync, constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../wait.js';

/** The domain of the test users. */
export const MAIL_DOMAIN = 'example.test';

/** One mailbox user. */
export interface MailUser {
  /** IMAP login. */
  user: string;
  pass: string;
  /** `user@example.test`. */
  address: string;
}

/** What `startMailServers` started. */
export interface MailServers {
  host: '127.0.0.1';
  imapPort: number;
  smtpPort: number;
  bot: MailUser;
  alice: MailUser;
  /** Stops both servers (the whole process groups) and removes the temp dir. */
  stop(): Promise<void>;
}

const BINARIES = [
  ['/usr/sbin/dovecot', 'dovecot-imapd'],
  ['/usr/lib/dovecot/imap', 'dovecot-imapd'],
  ['/usr/sbin/smtpd', 'opensmtpd'],
  ['/usr/bin/unshare', 'util-linux'],
] as const;
/** The mail owner: maildirs belong to it, both servers write and read them as it. */
const MAIL_UID = 65534;
const MAIL_GID = 65534;

function checkBinaries(): void {
  const missing = BINARIES.filter(([path]) => {
    try {
      accessSync(path, constants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length > 0)
    throw new Error(
      `email tests need ${missing.map(([p]) => p).join(', ')}: apt-get install -y ${[...new Set(missing.map(([, pkg]) => pkg))].join(' ')} (as root)`,
    );
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Whether a greeting comes from 127.0.0.1:`port`. */
const greets = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setTimeout(1000);
    socket.once('data', () => resolve(true));
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => resolve(false));
    socket.once('close', () => resolve(false));
  }).then((ok) => ok);

function dovecotConfig(dir: string, port: number): string {
  return `base_dir = ${dir}/dovecot-run
state_dir = ${dir}/dovecot-state
log_path = ${dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = dovecot
default_login_user = dovenull
first_valid_uid = 1
mailbox_idle_check_interval = 1 secs
mail_location = maildir:${dir}/mail/%n
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%n ${dir}/passwd
}
userdb {
  driver = static
  args = uid=${MAIL_UID} gid=${MAIL_GID} home=${dir}/home/%n
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${port}
  }
  inet_listener imaps {
    port = 0
  }
}
`;
}

function smtpdConfig(dir: string, port: number): string {
  return `table vusers file:${dir}/vusers
listen on 127.0.0.1 port ${port} hostname mx.${MAIL_DOMAIN}
action "deliver" maildir "${dir}/mail/%{dest.user:lowercase}" virtual <vusers>
match from any for domain "${MAIL_DOMAIN}" action "deliver"
`;
}

/** Process groups still running: killed when the test process exits without stopping them (a crash, a timeout). */
const running = new Set<number>();
process.once('exit', () => {
  for (const pid of running) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
});

function spawnGroup(cmd: string, args: string[], log: string[]): ChildProcess {
  const child = spawn(cmd, args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid !== undefined) running.add(child.pid);
  const keep = (b: Buffer) => {
    log.push(b.toString());
    if (log.length > 200) log.shift();
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return child;
}

async function stopGroup(child: ChildProcess): Promise<void> {
  const pid = child.pid;
  if (pid === undefined) return;
  const kill = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // The group is gone already.
    }
  };
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    kill('SIGTERM');
    const timer = setTimeout(() => kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  }
  // Children that outlived the leader (dovecot's services) go with the group.
  kill('SIGKILL');
  running.delete(pid);
}

/** Starts dovecot and OpenSMTPD for one test file; throws naming the apt packages when a binary is missing. */
export async function startMailServers(): Promise<MailServers> {
  checkBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'steerbot-mail-'));
  chmodSync(dir, 0o755);
  const users = { bot: 'bot-secret-pass', alice: 'alice-secret-pass' };
  for (const sub of ['mail', 'home', 'spool', 'run', 'dovecot-state']) mkdirSync(join(dir, sub));
  for (const name of Object.keys(users)) {
    for (const sub of ['mail', 'home']) {
      mkdirSync(join(dir, sub, name));
      chownSync(join(dir, sub, name), MAIL_UID, MAIL_GID);
    }
  }
  writeFileSync(
    join(dir, 'passwd'),
    Object.entries(users)
      .map(([u, p]) => `${u}:{PLAIN}${p}::::::\n`)
      .join(''),
  );
  writeFileSync(
    join(dir, 'vusers'),
    Object.keys(users)
      .map((u) => `${u}@${MAIL_DOMAIN} nobody\n`)
      .join(''),
  );
  const [imapPort, smtpPort] = [await freePort(), await freePort()];
  writeFileSync(join(dir, 'dovecot.conf'), dovecotConfig(dir, imapPort));
  writeFileSync(join(dir, 'smtpd.conf'), smtpdConfig(dir, smtpPort));

  const logs: string[] = [];
  const dovecot = spawnGroup('/usr/sbin/dovecot', ['-F', '-c', join(dir, 'dovecot.conf')], logs);
  const mounts = `mount --bind ${dir}/spool /var/spool && mount --bind ${dir}/run /run`;
  const smtpd = spawnGroup(
    '/usr/bin/unshare',
    ['--mount', '--propagation', 'private', '--', 'sh', '-c', `${mounts} && exec /usr/sbin/smtpd -d -f ${dir}/smtpd.conf`],
    logs,
  );
  const stop = async () => {
    await Promise.all([stopGroup(dovecot), stopGroup(smtpd)]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const [port, name, child] of [
      [imapPort, 'dovecot IMAP', dovecot],
      [smtpPort, 'OpenSMTPD', smtpd],
    ] as const)
      await waitFor(
        async () => {
          if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode}): ${logs.join('').slice(-2000)}`);
          return greets(port);
        },
        10_000,
        `${name} listening on 127.0.0.1:${port}`,
        50,
      );
  } catch (err) {
    await stop();
    throw err;
  }
  const user = (name: keyof typeof users): MailUser => ({ user: name, pass: users[name], address: `${name}@${MAIL_DOMAIN}` });
  return { host: '127.0.0.1', imapPort, smtpPort, bot: user('bot'), alice: user('alice'), stop };
}
