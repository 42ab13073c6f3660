// Provider calls: the `openai` SDK through our guarded fetch, pooled (after) and with a connection per call (before),
// against the same SDK with Node's own fetch (undici, keep-alive), all calling the fake provider on loopback over
// plain HTTP and over HTTPS with a throwaway certificate. Calls/s and p50/p99 at 1 and 16 clients, then the
// connections, TLS handshakes and TIME_WAIT sockets that 200 calls leave behind.
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import tls from 'node:tls';
import OpenAI from 'openai';
import { openAIClient } from '@agentplane/lib/models/openai-client';
import { ConnectionPool } from '@agentplane/lib/net/connection-pool';
import { selfSignedCertificate } from '../harness/tls.js';
import { FakeOpenAIServer } from '../fakes/openai-server.js';
import {
  Teardown,
  finishTable,
  latencyColumns,
  runCases,
  timeConcurrent,
  type BenchReport,
  type Case,
  type LoopOptions,
  type Row,
  type Subject,
  type Table,
} from './measure.js';

const MODEL = 'gpt-4o-mini';
const API_KEY = 'sk-bench-provider-key-0001';
const CLIENTS = [1, 16] as const;
const LOOPS: Record<(typeof CLIENTS)[number], LoopOptions> = {
  1: { warmup: 30, ops: 600 },
  16: { warmup: 64, ops: 1_600 },
};
const CHURN_CALLS = 200;
/** Clients sharing the 200 calls: one after another (a turn's calls), and 8 at once (25 each). */
const CHURN_CLIENTS = [1, 8] as const;
// Loopback is private: the guard must be told it may go there, as a developer's own model server would need.
const POLICY = { allowPrivate: true, allowHttp: true };
const TIMEOUT_MS = 30_000;

type Transport = 'http' | 'https';

/** One way of making a provider call, and what it holds open between calls. */
interface ProviderTarget extends Subject {
  call(): Promise<void>;
  close(): void;
}

async function chat(client: OpenAI): Promise<void> {
  const completion = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say something short.' }] });
  if (!completion.choices[0]?.message) throw new Error('the fake answered without a message');
}

const TARGETS: Array<(fake: FakeOpenAIServer) => ProviderTarget> = [
  (fake) => {
    const client = new OpenAI({ baseURL: fake.url, apiKey: API_KEY, maxRetries: 0 });
    return { impl: 'SDK + Node fetch', baseline: true, call: () => chat(client), close: () => {} };
  },
  (fake) => {
    const client = openAIClient({ baseUrl: fake.url, apiKey: API_KEY }, { policy: POLICY, timeoutMs: TIMEOUT_MS });
    return { impl: 'SDK + guarded, per call (before)', call: () => chat(client), close: () => {} };
  },
  (fake) => {
    const connections = new ConnectionPool();
    const client = openAIClient({ baseUrl: fake.url, apiKey: API_KEY }, { policy: POLICY, timeoutMs: TIMEOUT_MS, connections });
    return { impl: 'SDK + guarded, pooled (after)', call: () => chat(client), close: () => connections.close() };
  },
];

/** Sockets in TIME_WAIT with `port` at either end, as `ss` sees them; undefined where `ss` is missing. */
function timeWaitSockets(port: number): number | undefined {
  const result = spawnSync('ss', ['-Htan', 'state', 'time-wait', `( sport = :${port} or dport = :${port} )`], { encoding: 'utf8' });
  if (result.status !== 0) return undefined;
  return result.stdout.split('\n').filter((line) => line.trim()).length;
}

const load = () => loadavg()[0]!.toFixed(2);

async function latencyTable(transport: Transport, fake: FakeOpenAIServer): Promise<Table> {
  const targets = TARGETS.map((make) => make(fake));
  try {
    const cases: Case<ProviderTarget>[] = CLIENTS.map((clients) => ({
      name: `chat call, ${clients} client${clients === 1 ? '' : 's'}`,
      loop: LOOPS[clients],
      time: (target, loop) => timeConcurrent(() => target.call(), { ...loop, callers: clients }),
    }));
    const rows = await runCases(cases, targets);
    return finishTable({
      title: `provider: openai SDK calls to the fake provider over ${transport.toUpperCase()} on loopback`,
      columns: latencyColumns,
      rows,
      note: `one non-streamed chat completion per op; fake, SDK and fetch share this process. load average after: ${load()}`,
    });
  } finally {
    for (const target of targets) target.close();
  }
}

/** A fresh fake per target, so its port's connections and TIME_WAIT sockets are that target's alone. */
async function churnTable(transport: Transport, certificate: { key: string; cert: string } | undefined): Promise<Table> {
  const rows: Row[] = [];
  for (const clients of CHURN_CLIENTS) {
    for (const make of TARGETS) {
      const fake = await FakeOpenAIServer.start({ apiKey: API_KEY, chatModels: [MODEL], ...(certificate ? { tls: certificate } : {}) });
      const target = make(fake);
      try {
        const timing = await timeConcurrent(() => target.call(), { warmup: 0, ops: CHURN_CALLS, callers: clients });
        const figures: Record<string, number> = { calls: timing.ops, connections: fake.connectionsAccepted, handshakes: fake.handshakes };
        const timeWait = timeWaitSockets(Number(new URL(fake.url).port));
        if (timeWait !== undefined) figures.timeWait = timeWait;
        rows.push({ case: `${CHURN_CALLS} calls, ${clients} client${clients === 1 ? '' : 's'}`, impl: target.impl, baseline: target.baseline ?? false, figures });
      } finally {
        target.close();
        await fake.close();
      }
    }
  }
  return finishTable({
    title: `provider: connections left behind by ${CHURN_CALLS} calls over ${transport.toUpperCase()}`,
    columns: [
      { key: 'calls', label: 'calls' },
      { key: 'connections', label: 'new connections' },
      ...(transport === 'https' ? [{ key: 'handshakes', label: 'TLS handshakes' }] : []),
      { key: 'timeWait', label: 'TIME_WAIT' },
    ],
    rows,
    note: `counted by the fake (accepted connections, completed handshakes) and by ss (TIME_WAIT at either end of its port) before it closes. load average after: ${load()}`,
  });
}

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'provider', tables: [], skipped: [] };
  if (timeWaitSockets(1) === undefined) report.skipped.push('TIME_WAIT column: `ss` (iproute2) not found');
  const teardown = new Teardown();
  const trusted = tls.getCACertificates('default');
  try {
    const http = await FakeOpenAIServer.start({ apiKey: API_KEY, chatModels: [MODEL] });
    teardown.add(() => http.close());
    report.tables.push(await latencyTable('http', http));
    report.tables.push(await churnTable('http', undefined));

    // A throwaway certificate for 127.0.0.1, trusted by this process while the HTTPS cases run: every client
    // verifies it, as it would a provider's.
    const certificate = await selfSignedCertificate({ ip: '127.0.0.1' });
    tls.setDefaultCACertificates([...trusted, certificate.cert]);
    teardown.add(() => tls.setDefaultCACertificates(trusted));
    const https = await FakeOpenAIServer.start({ apiKey: API_KEY, chatModels: [MODEL], tls: certificate });
    teardown.add(() => https.close());
    report.tables.push(await latencyTable('https', https));
    report.tables.push(await churnTable('https', certificate));
  } finally {
    await teardown.run();
  }
  return report;
}
