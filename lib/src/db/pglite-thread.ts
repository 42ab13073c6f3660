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
// PGlite by the paths the main thread resolved, answers each statement by id, one at a time, and copies the fields
// of PostgreSQL's errors (`code` and the rest) that callers read.
//
// PGlite starts PostgreSQL with its default 128 MB of shared buffers, and WASM memory never shrinks: a process that
// had served a while held 100 MiB more than a fresh one, though its files are in the kernel's page cache anyway.
// 16 MB of buffers measured the same time per insert and per lookup, and caps that growth (docs/decisions/0036).
//
// PGlite's query() makes six calls into PostgreSQL per statement (parse, describe, bind, describe, execute, sync) and
// plans it afresh each time. A statement of the kinds the store sends again and again (a turn's start and end, the
// lookups) is prepared once under a name instead, and then runs in one call (bind, describe, execute, sync): a turn's
// two statements took 0.94 ms of PGlite's time that way against 0.35 ms (docs/decisions/0048). The parameters are
// serialized and the rows parsed with PGlite's own type handlers, by the types PostgreSQL described, as query() does.
// Statements that change the schema drop every prepared one, so none outlives the columns it was planned over.
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const PREPARED_LIMIT = 256;
const PREPARED_MAX_TEXT = 16384;
const repeatable = /^\\s*(select|insert|update|delete|with)\\b/i;
const changesSchema = /^\\s*(create|alter|drop|truncate|comment|reindex|grant|revoke|do)\\b/i;
const describe = (error) => {
  const out = { message: String((error && error.message) || error) };
  for (const key of ['code', 'detail', 'hint', 'constraint', 'table', 'column', 'schema', 'severity', 'position', 'where', 'routine']) {
    if (error && error[key] !== undefined) out[key] = error[key];
  }
  return out;
};
const frames = (parts) => {
  const out = new Uint8Array(parts.reduce((total, part) => total + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
};
(async () => {
  let db, serialize, parseType;
  try {
    const { PGlite, protocol, types } = await import(workerData.pglite);
    const { vector } = await import(workerData.vector);
    db = await PGlite.create({
      ...(workerData.dataDir ? { dataDir: workerData.dataDir } : {}),
      extensions: { vector },
      startParams: [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'],
    });
    serialize = protocol.serialize;
    parseType = types.parseType;
  } catch (error) {
    parentPort.postMessage({ kind: 'failed', error: describe(error) });
    return;
  }
  // By text, oldest use first: { name, types } of each statement prepared on this session.
  const prepared = new Map();
  let named = 0;
  const forget = async (name) => {
    await db.execProtocol(frames([serialize.close({ type: 'S', name }), serialize.sync()]), { syncToFs: false, throwOnError: false });
  };
  const preparedFor = async (text) => {
    const known = prepared.get(text);
    if (known) {
      prepared.delete(text);
      prepared.set(text, known);
      return known;
    }
    const name = 'agentplane_' + ++named;
    const { messages } = await db.execProtocol(
      frames([serialize.parse({ name, text }), serialize.describe({ type: 'S', name }), serialize.sync()]),
      { syncToFs: false },
    );
    const statement = { name, types: messages.find((m) => m.name === 'parameterDescription')?.dataTypeIDs ?? [] };
    prepared.set(text, statement);
    if (prepared.size > PREPARED_LIMIT) {
      const [oldest, dropped] = prepared.entries().next().value;
      prepared.delete(oldest);
      await forget(dropped.name);
    }
    return statement;
  };
  const run = async (text, params) => {
    if (!repeatable.test(text) || text.length > PREPARED_MAX_TEXT) {
      const result = await db.query(text, params, { rowMode: 'object' });
      if (changesSchema.test(text) && prepared.size > 0) {
        prepared.clear();
        await db.query('deallocate all');
      }
      return { rows: result.rows, affectedRows: result.affectedRows };
    }
    const statement = await preparedFor(text);
    const values = params.map((param, i) => {
      if (param === null || param === undefined) return null;
      const serializer = db.serializers[statement.types[i]];
      return serializer ? serializer(param) : param.toString();
    });
    const { messages } = await db.execProtocol(
      frames([serialize.bind({ statement: statement.name, values }), serialize.describe({ type: 'P' }), serialize.execute({}), serialize.sync()]),
    );
    let fields = [];
    const rows = [];
    let affectedRows = 0;
    for (const message of messages) {
      if (message.name === 'rowDescription') fields = message.fields;
      else if (message.name === 'dataRow') {
        rows.push(Object.fromEntries(message.fields.map((value, i) => [fields[i].name, parseType(value, fields[i].dataTypeID, db.parsers)])));
      } else if (message.name === 'commandComplete') {
        const words = message.text.split(' ');
        if (['INSERT', 'UPDATE', 'DELETE', 'COPY', 'MERGE'].includes(words[0])) affectedRows += parseInt(words[words.length - 1], 10);
      }
    }
    return { rows, affectedRows };
  };
  // One statement at a time, in the order they came: a statement first prepared takes two calls into PostgreSQL.
  let tail = Promise.resolve();
  parentPort.on('message', (message) => {
    tail = tail.then(async () => {
      if (message.kind === 'close') {
        await db.close().catch(() => undefined);
        parentPort.postMessage({ kind: 'closed' });
        return;
      }
      try {
        const result = await run(message.sql, message.params);
        parentPort.postMessage({ kind: 'result', id: message.id, rows: result.rows, affectedRows: result.affectedRows });
      } catch (error) {
        parentPort.postMessage({ kind: 'result', id: message.id, error: describe(error) });
      }
    });
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
