/**
 * Reads pages off the event loop. Readability and linkedom are synchronous:
 * a crafted page of a few hundred kilobytes (thousands of nested elements,
 * a megabyte of links) holds the thread for seconds, and in the main thread
 * that stops every conversation of the process, leases included. So
 * `readableText` runs in worker threads, at most `MAX_WORKERS` at once (the
 * rest wait their turn), each given a time limit and a heap limit: a worker
 * over either is terminated, the caller gets a `PageReadError`, and the next
 * page gets a fresh worker. An idle worker ends after `IDLE_MS`; none keeps
 * the process alive.
 *
 * The worker imports this module's sibling `readable` (the compiled file, or
 * the TypeScript source under a type-stripping Node), so the code that runs
 * there is the code tested here.
 */
import { Worker } from 'node:worker_threads';
import { READABLE_MODULE, type ReadablePage, readableText } from './readable.js';

/** Worker threads reading pages at once; further pages wait. */
const MAX_WORKERS = 2;
/** An idle worker ends after this long, in ms. */
const IDLE_MS = 30_000;
/** Heap of one worker, in MB: a page that needs more is refused, not the process's memory. */
const WORKER_HEAP_MB = 256;

/** A page that could not be read: over the time or memory limit, or one the reader failed on. */
export class PageReadError extends Error {
  constructor(
    message: string,
    /** `timeout`: over the time limit; `failed`: the reader threw or ran out of memory. */
    readonly reason: 'timeout' | 'failed',
  ) {
    super(message);
    this.name = 'PageReadError';
  }
}

// CommonJS (an eval worker): answers each { html, url } with { page } or { error }, from `readableText` of `readable`.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const reader = import(workerData.module);
parentPort.on('message', async ({ html, url }) => {
  try {
    parentPort.postMessage({ page: await (await reader)[${JSON.stringify(readableText.name)}](html, url) });
  } catch (err) {
    parentPort.postMessage({ error: err instanceof Error ? err.message : String(err) });
  }
});
`;

type Answer = { page: ReadablePage } | { error: string };

const idle: Array<{ worker: Worker; timer: NodeJS.Timeout }> = [];
const queue: Array<() => void> = [];
let running = 0;

function spawn(): Worker {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { module: READABLE_MODULE },
    resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
  });
  // A read listens for its own worker's errors; one that comes while none listens (an idle worker, or one being
  // ended after a timeout) would otherwise be thrown as an unhandled 'error' event and end the process.
  worker.on('error', () => {});
  worker.unref();
  return worker;
}

const aborted = () => new PageReadError('reading the page was aborted', 'failed');

/** Waits for a place (`release` hands one on); an abort of `signal` leaves the queue. */
function turn(signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const go = () => {
      signal?.removeEventListener('abort', leave);
      resolve();
    };
    const leave = () => {
      const i = queue.indexOf(go);
      if (i >= 0) queue.splice(i, 1);
      reject(aborted());
    };
    queue.push(go);
    signal?.addEventListener('abort', leave, { once: true });
  });
}

/** An idle worker, or a new one; waits while `MAX_WORKERS` are reading. A worker that cannot start gives its place back. */
async function take(signal: AbortSignal | undefined): Promise<Worker> {
  if (signal?.aborted) throw aborted();
  while (running >= MAX_WORKERS) await turn(signal);
  if (signal?.aborted) {
    // Woken for a place it no longer wants: the next waiter gets the wake.
    queue.shift()?.();
    throw aborted();
  }
  running++;
  const kept = idle.pop();
  if (kept) {
    clearTimeout(kept.timer);
    return kept.worker;
  }
  try {
    return spawn();
  } catch (err) {
    release(undefined);
    throw new PageReadError(`the page could not be read: ${err instanceof Error ? err.message : String(err)}`, 'failed');
  }
}

/** Frees a place; a worker that finished cleanly waits for the next page. */
function release(worker: Worker | undefined): void {
  running--;
  if (worker) {
    const timer = setTimeout(() => {
      const i = idle.findIndex((w) => w.worker === worker);
      if (i >= 0) idle.splice(i, 1);
      void worker.terminate();
    }, IDLE_MS);
    timer.unref();
    idle.push({ worker, timer });
  }
  queue.shift()?.();
}

/**
 * The readable title and text of `html` fetched from `url`, read in a worker
 * thread within `timeoutMs`. Rejects with `PageReadError` over the time limit,
 * on an abort of `signal`, or when the reader fails.
 */
export async function readPage(html: string, url: string, timeoutMs: number, signal?: AbortSignal): Promise<ReadablePage> {
  const worker = await take(signal);
  let clean = false;
  try {
    const answer = await new Promise<Answer>((resolve, reject) => {
      const fail = (err: PageReadError) => {
        cleanup();
        reject(err);
      };
      const onMessage = (a: Answer) => {
        cleanup();
        resolve(a);
      };
      const onError = (err: Error) => fail(new PageReadError(`the page could not be read: ${err.message}`, 'failed'));
      const onExit = () => fail(new PageReadError('the page could not be read: the reader stopped', 'failed'));
      const onAbort = () => fail(aborted());
      const timer = setTimeout(() => fail(new PageReadError(`the page took more than ${timeoutMs} ms to read`, 'timeout')), timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
        signal?.removeEventListener('abort', onAbort);
      };
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (signal?.aborted) onAbort();
      else worker.postMessage({ html, url });
    });
    clean = true;
    if ('error' in answer) throw new PageReadError(`the page could not be read: ${answer.error}`, 'failed');
    return answer.page;
  } finally {
    if (!clean) void worker.terminate();
    release(clean ? worker : undefined);
  }
}
