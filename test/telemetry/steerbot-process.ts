/**
 * `steerbot start` in a child process (the real CLI, as an operator runs it),
 * with JSON logs collected line by line: for end-to-end tests across
 * processes (a host-only and a runner-only process on one Redis).
 */
import { type ChildProcess, spawn } from 'node:child_process';

/** A started steerbot process. */
export interface SteerbotProcess {
  proc: ChildProcess;
  /** Its JSON log lines so far. */
  logs: Array<Record<string, any>>;
  /** SIGTERM (a graceful stop: buffered spans are exported); resolves once it has exited. */
  stop(): Promise<void>;
}

/** Starts `steerbot start` with `env` on top of PATH and resolves once it logged `steerbot started`. */
export async function startSteerbotProcess(env: Record<string, string>, timeoutMs = 30_000): Promise<SteerbotProcess> {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'app/cli.ts', 'start'], {
    env: { PATH: process.env.PATH ?? '', LOG_FORMAT: 'json', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Array<Record<string, any>> = [];
  let partial = '';
  let stderr = '';
  const exit = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const started = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`steerbot did not start within ${timeoutMs} ms; stderr: ${stderr}`)), timeoutMs);
    proc.stdout!.on('data', (d: Buffer) => {
      const lines = (partial + d.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.trim()) continue;
        try {
          const entry = JSON.parse(line) as Record<string, any>;
          logs.push(entry);
          if (entry.msg === 'steerbot started') {
            clearTimeout(timer);
            resolve();
          }
        } catch {
          // not a log line
        }
      }
    });
    void exit.then(() => {
      clearTimeout(timer);
      reject(new Error(`steerbot exited (${proc.exitCode ?? proc.signalCode}) before it started; stderr: ${stderr}`));
    });
  });
  try {
    await started;
  } catch (err) {
    proc.kill('SIGKILL');
    throw err;
  }
  return {
    proc,
    logs,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exit;
    },
  };
}
