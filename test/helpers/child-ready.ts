/**
 * Waits for a child process of a test to print `ready <value>` on a line of
 * its stdout and returns the value; rejects, with the tail of its stderr,
 * when it exits first or `timeoutMs` passes (it is then killed).
 */
import type { ChildProcess } from 'node:child_process';

export function readyLine(proc: ChildProcess, what: string, timeoutMs = 30_000): Promise<string> {
  let out = '';
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`${what} not ready within ${timeoutMs} ms; stderr: ${err}`));
    }, timeoutMs);
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^ready (\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code ?? signal}) before ready; stderr: ${err}`));
    });
  });
}
