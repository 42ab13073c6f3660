// The embedded database on a thread of its own (docs/decisions/0035). PGlite is PostgreSQL compiled to WASM and runs
// every statement on the thread that calls it; on the main thread that was most of a turn's CPU, queued behind HTTP
// and the model relay. Here it runs on a worker thread, so a process on two cores uses both, and the main thread only
// posts the statement and reads back the rows (structured clone keeps dates, buffers and numbers as PGlite made them).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { unavailable } from '../errors.js';

export interface PgliteResult<R> {
  rows: R[];
  affectedRows?: number;
}

/** A PGlite instance on its own thread: one statement at a time is the caller's business (pgliteSerialPool). */
export interface PgliteThread {
  query<R>(sqlText: string, parameters: readonly unknown[]): Promise<PgliteResult<R>>;
  close(): Promise<void>;
}

// The thread's code, as a script: it needs no TypeScript loader, in the sources, the build or a test runner. It loads
// PGlite by the paths the main thread resolved, answers each statement by id, and copies the fields of PostgreSQL's
// errors (`code` and the rest) that callers read.
//
// PGlite starts PostgreSQL with its default 128 MB of shared buffers, and WASM memory never shrinks: a process that
// had served a while held 100 MiB more than a fresh one, though its files are in the kernel's page cache anyway.
// 16 MB of buffers measured the same time per insert and per lookup, and caps that growth (docs/decisions/0036).
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const describe = (error) => {
  const out = { message: String((error && error.message) || error) };
  for (const key of ['code', 'detail', 'hint', 'constraint', 'table', 'column', 'schema', 'severity', 'position', 'where', 'routine']) {
    if (error && error[key] !== undefined) out[key] = error[key];
  }
  return out;
};
(async () => {
  let db;
  try {
    const { PGlite } = await import(workerData.pglite);
    const { vector } = await import(workerData.vector);
    db = await PGlite.create({
      ...(workerData.dataDir ? { dataDir: workerData.dataDir } : {}),
      extensions: { vector },
      startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'],
    });
  } catch (error) {
    parentPort.postMessage({ kind: 'failed', error: describe(error) });
    return;
  }
  parentPort.on('message', async (message) => {
    if (message.kind === 'close') {
      await db.close().catch(() => undefined);
      parentPort.postMessage({ kind: 'closed' });
      return;
    }
    try {
      const result = await db.query(message.sql, message.params, { rowMode: 'object' });
      parentPort.postMessage({ kind: 'result', id: message.id, rows: result.rows, affectedRows: result.affectedRows });
    } catch (error) {
      parentPort.postMessage({ kind: 'result', id: message.id, error: describe(error) });
    }
  });
  parentPort.postMessage({ kind: 'ready' });
})();
`;

type ThreadMessage =
  | { kind: 'ready' }
  | { kind: 'closed' }
  | { kind: 'failed'; error: ErrorFields }
  | { kind: 'result'; id: number; rows?: unknown[]; affectedRows?: number; error?: ErrorFields };

interface ErrorFields {
  message: string;
  [field: string]: unknown;
}

/** An error from the thread, shaped as PGlite's own: its message, and `code`, `constraint` and the rest as fields. */
function databaseError(fields: ErrorFields): Error {
  const { message, ...rest } = fields;
  return Object.assign(new Error(message), rest);
}

/** Starts PGlite with pgvector on a worker thread over `dataDir` (in memory when omitted); resolves once it answers. */
export async function startPgliteThread(dataDir: string | undefined): Promise<PgliteThread> {
  const require = createRequire(import.meta.url);
  const module = (name: string) => pathToFileURL(require.resolve(name)).href;
  const worker = new Worker(THREAD_SOURCE, {
    eval: true,
    workerData: { dataDir, pglite: module('@electric-sql/pglite'), vector: module('@electric-sql/pglite-pgvector') },
    // The thread's own V8 heap grew its young generation to V8's default maximum and kept it: its committed heap
    // went from 51 to 146 MiB over 20,000 turns while 20-50 MiB was in use. A small young generation holds it near
    // 25 MiB (docs/benchmarks.md); the thread's JavaScript is a thin wrapper, so the extra scavenges cost little.
    resourceLimits: { maxYoungGenerationSizeMb: 6 },
  });
  const waiting = new Map<number, { resolve: (result: PgliteResult<unknown>) => void; reject: (error: unknown) => void }>();
  let nextId = 0;
  let gone: Error | undefined;
  let closed: (() => void) | undefined;
  const failAll = (error: Error) => {
    gone ??= error;
    for (const pending of waiting.values()) pending.reject(gone);
    waiting.clear();
  };

  await new Promise<void>((resolve, reject) => {
    worker.on('message', (message: ThreadMessage) => {
      if (message.kind === 'ready') resolve();
      else if (message.kind === 'failed') reject(databaseError(message.error));
      else if (message.kind === 'closed') closed?.();
      else {
        const pending = waiting.get(message.id);
        settle(message.id);
        if (message.error) pending?.reject(databaseError(message.error));
        else pending?.resolve({ rows: message.rows ?? [], ...(message.affectedRows === undefined ? {} : { affectedRows: message.affectedRows }) });
      }
    });
    worker.on('error', (error) => {
      failAll(unavailable('the embedded database stopped', { cause: error }));
      reject(error);
    });
    worker.on('exit', (code) => {
      failAll(unavailable(`the embedded database stopped (exit ${code})`));
      reject(gone);
    });
  }).catch(async (error: unknown) => {
    await worker.terminate();
    throw error;
  });
  // The thread keeps the process alive only while a statement is waiting on it: idle, it never holds up an exit
  // (whoever opened the database closes it).
  worker.unref();
  const settle = (id: number) => {
    waiting.delete(id);
    if (waiting.size === 0) worker.unref();
  };

  return {
    query<R>(sqlText: string, parameters: readonly unknown[]): Promise<PgliteResult<R>> {
      if (gone) return Promise.reject(gone);
      const id = ++nextId;
      return new Promise<PgliteResult<R>>((resolve, reject) => {
        if (waiting.size === 0) worker.ref();
        waiting.set(id, { resolve: resolve as (result: PgliteResult<unknown>) => void, reject });
        worker.postMessage({ kind: 'query', id, sql: sqlText, params: parameters });
      });
    },
    async close(): Promise<void> {
      if (!gone) {
        worker.ref();
        await new Promise<void>((resolve) => {
          closed = resolve;
          worker.postMessage({ kind: 'close' });
        });
      }
      failAll(unavailable('the embedded database is closed'));
      await worker.terminate();
    },
  };
}
