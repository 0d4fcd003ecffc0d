/** steerbot run as an operator runs it, in a child process whose output the test reads. */
import { type ChildProcess, spawn } from 'node:child_process';
import { builtCli } from './built-package.js';

/** A child process and what it has printed so far. */
export interface Captured {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code once it has exited. */
  exited: Promise<number | null>;
}

/** Starts `node <nodeArgs>` with only `env` (and PATH) set, collecting its output. */
export function spawnCaptured(nodeArgs: string[], env: Record<string, string>, cwd?: string): Captured {
  const child = spawn(process.execPath, nodeArgs, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'], ...(cwd && { cwd }) });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** What a CLI run printed, and how it exited. */
export interface CliRun {
  code: number | null;
  out: string;
  err: string;
}

/** Runs `steerbot <args>` from the checkout's sources with only `env` (and PATH) set; resolves once it exits. */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  const run = spawnCaptured(['--import', 'tsx', 'app/cli.ts', ...args], env);
  const code = await run.exited;
  return { code, out: run.stdout(), err: run.stderr() };
}

/** Runs `steerbot <args>` as the package installs it (the built `dist/app/cli.js`, nothing compiled as it starts); resolves once it exits. */
export async function runBuiltCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  const run = spawnCaptured([await builtCli(), ...args], env);
  const code = await run.exited;
  return { code, out: run.stdout(), err: run.stderr() };
}
