// Run by memory.bench.ts in a fresh `node --expose-gc --import tsx` process: records memory, opens one adapter (ours
// or the raw client) and makes one write and one read through it, records memory again, and prints both as JSON.
// Modules are imported inside each opener, so their load cost counts toward the adapter that needs them.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface ProbeSpec {
  subject: ProbeSubject;
  /** A temp dir for PGlite and the filesystem store. */
  dir: string;
  postgresUrl?: string;
  redisUrl?: string;
  s3?: { endpoint: string; bucket: string; region: string; accessKeyId: string; secretAccessKey: string };
  /** Event subjects append this many frames after opening and keep them. */
  frames?: number;
}

export interface ProbeResult {
  before: NodeJS.MemoryUsage;
  after: NodeJS.MemoryUsage;
}

type Close = () => Promise<unknown>;

const frame = (seq: number) => ({ type: 'text-delta', seq, text: 'lorem ipsum dolor sit amet '.repeat(4) });
const DDL = 'create table probe (id integer primary key, body text)';

const openers = {
  'pglite:ours': async (spec: ProbeSpec): Promise<Close> => {
    const { openDatabase } = await import('@agentplane/lib/db/database');
    const { sql } = await import('kysely');
    const database = await openDatabase({ driver: 'pglite', dataDir: spec.dir });
    await sql.raw(DDL).execute(database.db);
    await sql`insert into probe values (1, 'x')`.execute(database.db);
    await sql`select * from probe where id = 1`.execute(database.db);
    return () => database.close();
  },
  'pglite:raw': async (spec: ProbeSpec): Promise<Close> => {
    const { PGlite } = await import('@electric-sql/pglite');
    const { vector } = await import('@electric-sql/pglite-pgvector');
    const pglite = await PGlite.create({ dataDir: spec.dir, extensions: { vector } });
    await pglite.exec(DDL);
    await pglite.query(`insert into probe values (1, 'x')`);
    await pglite.query('select * from probe where id = 1');
    return () => pglite.close();
  },
  'postgres:ours': async (spec: ProbeSpec): Promise<Close> => {
    const { openDatabase } = await import('@agentplane/lib/db/database');
    const { sql } = await import('kysely');
    const database = await openDatabase({ driver: 'postgres', url: spec.postgresUrl! });
    await sql.raw(DDL).execute(database.db);
    await sql`insert into probe values (1, 'x')`.execute(database.db);
    await sql`select * from probe where id = 1`.execute(database.db);
    return () => database.close();
  },
  'postgres:raw': async (spec: ProbeSpec): Promise<Close> => {
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: spec.postgresUrl!, max: 10 });
    await pool.query(DDL);
    await pool.query(`insert into probe values (1, 'x')`);
    await pool.query('select * from probe where id = 1');
    return () => pool.end();
  },
  'memory-bus:ours': async (spec: ProbeSpec): Promise<Close> => {
    const { createEventBus } = await import('@agentplane/lib/events');
    const bus = await createEventBus({ kind: 'memory' });
    for (let seq = 1; seq <= (spec.frames ?? 1); seq++) await bus.logs.append('probe', frame(seq));
    await bus.logs.read('probe', 0);
    return () => bus.close();
  },
  'memory-bus:raw': async (spec: ProbeSpec): Promise<Close> => {
    const logs = new Map<string, string[]>([['probe', []]]);
    for (let seq = 1; seq <= (spec.frames ?? 1); seq++) logs.get('probe')!.push(JSON.stringify(frame(seq)));
    logs.get('probe')!.map((json) => JSON.parse(json) as unknown);
    // Keeps the log reachable until the second measurement, as the bus keeps its frames.
    return async () => logs.clear();
  },
  'redis-bus:ours': async (spec: ProbeSpec): Promise<Close> => {
    const { createEventBus } = await import('@agentplane/lib/events');
    const keyPrefix = `probe-${randomBytes(4).toString('hex')}:`;
    const bus = await createEventBus({ kind: 'redis', url: spec.redisUrl!, keyPrefix });
    for (let seq = 1; seq <= (spec.frames ?? 1); seq++) await bus.logs.append('probe', frame(seq));
    await bus.logs.read('probe', 0);
    return () => bus.close();
  },
  'redis-bus:raw': async (spec: ProbeSpec): Promise<Close> => {
    const { createClient } = await import('redis');
    const client = createClient({ url: spec.redisUrl! });
    await client.connect();
    const key = `probe-${randomBytes(4).toString('hex')}:log`;
    for (let seq = 1; seq <= (spec.frames ?? 1); seq++) {
      await client.xAdd(key, `${seq}-0`, { d: JSON.stringify(frame(seq)) });
    }
    await client.xRange(key, '-', '+');
    return () => client.close();
  },
  'fs-store:ours': async (spec: ProbeSpec): Promise<Close> => {
    const { createBlobStore } = await import('@agentplane/runtime/blob');
    const store = await createBlobStore({
      kind: 'fs',
      root: spec.dir,
      publicBaseUrl: 'http://127.0.0.1:8081',
      signingSecret: randomBytes(32).toString('hex'),
    });
    await store.put('probe/blob', randomBytes(4096));
    for await (const _chunk of (await store.get('probe/blob')).body);
    return async () => {};
  },
  'fs-store:raw': async (spec: ProbeSpec): Promise<Close> => {
    mkdirSync(spec.dir, { recursive: true });
    await writeFile(join(spec.dir, 'blob'), randomBytes(4096));
    await readFile(join(spec.dir, 'blob'));
    return async () => {};
  },
  's3-store:ours': async (spec: ProbeSpec): Promise<Close> => {
    const { createBlobStore } = await import('@agentplane/runtime/blob');
    const store = await createBlobStore({ kind: 's3', ...spec.s3!, forcePathStyle: true, prefix: 'probe-ours' });
    await store.put('probe/blob', randomBytes(4096));
    for await (const _chunk of (await store.get('probe/blob')).body);
    return async () => {};
  },
  's3-store:raw': async (spec: ProbeSpec): Promise<Close> => {
    const { GetObjectCommand, PutObjectCommand, S3Client } = await import('@aws-sdk/client-s3');
    const { endpoint, region, bucket, accessKeyId, secretAccessKey } = spec.s3!;
    const client = new S3Client({
      endpoint,
      region,
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'probe-raw/blob', Body: randomBytes(4096) }));
    const response = await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'probe-raw/blob' }));
    for await (const _chunk of response.Body as AsyncIterable<Uint8Array>);
    return async () => client.destroy();
  },
};

export type ProbeSubject = keyof typeof openers;

/** Several collections, so objects that became garbage during the open do not count. */
function settled(): NodeJS.MemoryUsage {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('memory-probe needs node --expose-gc');
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage();
}

async function probe(spec: ProbeSpec): Promise<ProbeResult> {
  const before = settled();
  const close = await openers[spec.subject](spec);
  const after = settled();
  await close();
  return { before, after };
}

// Imported only for its types (erased), so this runs only when the file is the entry.
const spec = JSON.parse(process.argv[2] ?? '{}') as ProbeSpec;
process.stdout.write(`${JSON.stringify(await probe(spec))}\n`);
