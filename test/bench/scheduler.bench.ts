// The scheduler at the platform's scale: BENCH_SCHEDULES (10,000) one-shot tasks whose moments are spread evenly over
// BENCH_SCHEDULE_WINDOW_S (300) seconds, two compiled runtime processes on one PostgreSQL and one Redis both running
// the scheduler, each fire a whole unattended turn against the fake provider (its own process). Reported: fire
// jitter (when a fire's run started less the moment it was planned for, p50 / p99 / max), fires, doubles (a slot
// fired twice) and misses (a task never fired), and how the fires split between the replicas. The baseline, in the
// same run: a timer in this process set for the same moments, the machine's own pace for waking at a time.
import { rmSync } from 'node:fs';
import pg from 'pg';
import { CHAT_CAPABILITIES, MODEL, providerSection } from '../chat/fixture.js';
import { availableSetups, configuredTenant, ScaleServices } from '../harness/runtime.js';
import { makeTempDir } from '../harness/process.js';
import { startProviderProcess, startRuntimeProcess, type RuntimeProcess } from './children.js';
import { finishTable, percentile, Teardown, type BenchReport, type Table } from './measure.js';

const SCHEDULES = Number(process.env.BENCH_SCHEDULES ?? 10_000);
const WINDOW_S = Number(process.env.BENCH_SCHEDULE_WINDOW_S ?? 300);
/** Tasks per subject (the per-person limit is 100). */
const PER_SUBJECT = 100;

export async function run(): Promise<BenchReport> {
  const report: BenchReport = { name: 'scheduler', tables: [], skipped: [] };
  if (!availableSetups().includes('scale')) {
    report.skipped.push('scheduler: PostgreSQL, Redis or MinIO binary not found (two replicas need a shared store)');
    return report;
  }
  const teardown = new Teardown();
  try {
    const services = await ScaleServices.start();
    teardown.add(() => services.stop());
    const env = await services.env();
    const provider = await startProviderProcess({ apiKey: 'sk-bench-scheduler-0001', chatModels: [MODEL], record: false, defaultReply: { text: 'Done.' } });
    teardown.add(() => provider.stop());
    const replicas: RuntimeProcess[] = [];
    for (let i = 0; i < 2; i++) {
      const dataDir = makeTempDir(`bench-scheduler-${i}`);
      teardown.add(() => rmSync(dataDir, { recursive: true, force: true }));
      const runtime = await startRuntimeProcess({ dataDir, env });
      teardown.add(() => runtime.stop());
      replicas.push(runtime);
    }
    const [first] = replicas;
    const tenant = await configuredTenant({ admin: first!.admin }, { ceiling: { capabilities: [...CHAT_CAPABILITIES, 'tasks:read', 'tasks:write'], registeredModels: [MODEL] } });
    const pushed = await tenant.reconfigure({ providers: providerSection(provider), default_model: MODEL });
    if (pushed.status !== 200) throw new Error(`pushing the provider answered ${pushed.status}: ${await pushed.text()}`);

    // The moments: evenly spread over the window, which starts once every task can have been made.
    const start = Date.now() + 30_000 + SCHEDULES * 6;
    const moments = Array.from({ length: SCHEDULES }, (_, i) => start + Math.floor((i * WINDOW_S * 1000) / SCHEDULES));
    const subjects = Math.ceil(SCHEDULES / PER_SUBJECT);
    const tokens = await Promise.all(Array.from({ length: subjects }, (_, s) => tenant.mint({ capabilities: [...CHAT_CAPABILITIES, 'tasks:read', 'tasks:write'], sub: `bench:user${s}`, scope: `bench:user${s}` })));
    let next = 0;
    const made = Date.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < SCHEDULES) {
          const i = next++;
          const res = await fetch(`${replicas[i % 2]!.url}/tasks`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens[Math.floor(i / PER_SUBJECT)]}` },
            body: JSON.stringify({ prompt: `Scheduled work ${i}.`, run_at: new Date(moments[i]!).toISOString() }),
          });
          if (res.status !== 201) throw new Error(`creating task ${i} answered ${res.status}: ${await res.text()}`);
        }
      }),
    );
    const makingMs = Date.now() - made;
    if (Date.now() > start) throw new Error(`making ${SCHEDULES} tasks took ${makingMs} ms, past the first moment`);

    // The baseline: this process's own timers for the same moments.
    const timerLate: number[] = [];
    const timers = moments.map((moment) => setTimeout(() => timerLate.push(Date.now() - moment), moment - Date.now()));
    teardown.add(async () => timers.forEach(clearTimeout));

    const db = new pg.Client({ connectionString: env.DATABASE_URL });
    await db.connect();
    teardown.add(() => db.end());
    const deadline = start + WINDOW_S * 1000 + 180_000;
    for (;;) {
      const { rows } = await db.query<{ open: string }>(`select count(*) as open from tasks where tenant_id = $1 and status in ('scheduled', 'running')`, [tenant.tenantId]);
      if (Number(rows[0]!.open) === 0 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
    const fires = await db.query<{ task_id: string; late_ms: number; claimed_by: string | null; run_id: string }>(
      `select task_id, extract(epoch from (started_at - slot)) * 1000 as late_ms, claimed_by, run_id from task_fires where tenant_id = $1`,
      [tenant.tenantId],
    );
    const started = fires.rows.filter((fire) => fire.late_ms !== null).map((fire) => Number(fire.late_ms)).sort((a, b) => a - b);
    const distinct = new Set(fires.rows.map((fire) => fire.task_id)).size;
    const runs = await db.query<{ n: string }>(`select count(*) as n from runs where id = any($1)`, [fires.rows.map((fire) => fire.run_id)]);
    const statuses = await db.query<{ status: string; n: string }>(`select status, count(*) as n from tasks where tenant_id = $1 group by status`, [tenant.tenantId]);
    const owners = new Map<string, number>();
    for (const fire of fires.rows) owners.set(fire.claimed_by ?? 'none', (owners.get(fire.claimed_by ?? 'none') ?? 0) + 1);
    const timerSorted = [...timerLate].sort((a, b) => a - b);
    const table: Table = finishTable({
      title: `scheduler: ${SCHEDULES} one-shot tasks over ${WINDOW_S} s, two runtime replicas on one PostgreSQL`,
      columns: [
        { key: 'fires', label: 'fires' },
        { key: 'doubles', label: 'doubles' },
        { key: 'misses', label: 'misses' },
        { key: 'p50', label: 'late p50 ms', ratio: true },
        { key: 'p99', label: 'late p99 ms', ratio: true },
        { key: 'max', label: 'late max ms' },
      ],
      rows: [
        {
          case: 'fire at the planned moment',
          impl: 'a timer in the bench process',
          baseline: true,
          figures: { fires: timerLate.length, doubles: 0, misses: SCHEDULES - timerLate.length, p50: percentile(timerSorted, 0.5), p99: percentile(timerSorted, 0.99), max: timerSorted.at(-1) ?? Number.NaN },
        },
        {
          case: 'fire at the planned moment',
          impl: 'ours: run started, either replica',
          figures: {
            fires: fires.rows.length,
            doubles: fires.rows.length - distinct,
            misses: SCHEDULES - distinct,
            p50: percentile(started, 0.5),
            p99: percentile(started, 0.99),
            max: started.at(-1) ?? Number.NaN,
          },
        },
      ],
      note:
        `late: when the fire's run started less its planned moment. Runs stored: ${runs.rows[0]!.n}; task statuses: ` +
        `${statuses.rows.map((row) => `${row.status} ${row.n}`).join(', ')}; fires per replica: ${[...owners.values()].join(' / ')}; ` +
        `making the tasks took ${(makingMs / 1000).toFixed(1)} s (${Math.round((SCHEDULES * 1000) / makingMs)} a second through POST /tasks).`,
    });
    report.tables.push(table);
    return report;
  } finally {
    await teardown.run();
  }
}
