/** The `steerbot` CLI run as an operator runs it, in a child process. */
import { spawn } from 'node:child_process';

/** What a CLI run printed, and how it exited. */
export interface CliRun {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `steerbot <args>` from the checkout's sources with only `env` (and PATH) set; resolves once it exits. */
export function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'app/cli.ts', ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out, err })));
}
