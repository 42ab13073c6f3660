// The assistant text of steps being streamed, saved to their conversations as it grows (SPEC.md Errors 10: what a
// client saw streamed survives a crash of the process running it). One keeper per process writes the drafts of all
// its runs together, one statement per tick, so 5,000 open streams cost a statement every quarter second rather
// than 5,000 a second; no token ever waits on the database.
import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeSchema } from '../store/schema.js';

/** What a draft row is written with; its text comes from the step as it grows. */
export interface DraftOwner {
  tenantId: string;
  sessionId: string;
  runId: string;
  subject: string;
  model: string;
}

/** One step's draft: offered text as it grows, settled when the step ends. */
export interface StepDraft {
  /** Offers the text so far; it is written at the keeper's next tick once the draft is old enough. */
  grow(text: string): void;
  /** Stops writing, waits for a write of this draft in flight, and gives the draft row's id (null when none was written). */
  settled(): Promise<string | null>;
}

interface Entry {
  owner: DraftOwner;
  id: string;
  /** Whether the row exists (a write of it committed). */
  written: boolean;
  /** Text offered and not yet written; null when the row holds the latest. */
  text: string | null;
  /** Not written before this time: the step's start plus an interval, then each write plus one. */
  dueAt: number;
  /** The write that holds this draft's text, while it runs. */
  inFlight: Promise<void> | null;
  settledAlready: boolean;
}

export class DraftKeeper {
  private readonly entries = new Set<Entry>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> | null = null;

  /**
   * `intervalMs`: a draft is written about this long (no sooner than three quarters of it) after its step started and
   * after its last write, so a step shorter than that writes no draft at all, and a crash loses at most about this
   * much of the text.
   */
  constructor(
    private readonly db: Kysely<RuntimeSchema>,
    private readonly logger: Logger,
    private readonly intervalMs: number,
  ) {}

  /** Drafts offered text and not settled yet, written or not (tests and metrics). */
  get open(): number {
    return this.entries.size;
  }

  /** The draft of a step that starts now. */
  start(owner: DraftOwner): StepDraft {
    const entry: Entry = { owner, id: randomUUID(), written: false, text: null, dueAt: Date.now() + this.intervalMs, inFlight: null, settledAlready: false };
    return {
      grow: (text) => {
        if (entry.settledAlready) return;
        entry.text = text;
        if (!this.entries.has(entry)) {
          this.entries.add(entry);
          this.schedule();
        }
      },
      settled: async () => {
        entry.settledAlready = true;
        entry.text = null;
        this.entries.delete(entry);
        // A write that holds this draft lands before whoever settles it reads or replaces the row.
        await entry.inFlight;
        return entry.written ? entry.id : null;
      },
    };
  }

  private schedule(): void {
    if (this.timer) return;
    // A quarter of the interval: a draft due now waits at most that long for its write.
    this.timer = setInterval(() => void this.tick(), this.tickMs);
    this.timer.unref();
  }

  private get tickMs(): number {
    return Math.max(10, this.intervalMs / 4);
  }

  private async tick(): Promise<void> {
    if (this.writing) return;
    if (this.entries.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
      return;
    }
    const now = Date.now();
    // Due by the next tick is written with this one: drafts whose steps started together (in the same millisecond
    // or a few apart, as a burst of turns does) share one statement, instead of a tick landing between their due
    // times and splitting them. So a draft is written no sooner than three quarters of the interval.
    const due = [...this.entries].filter((entry) => entry.text !== null && entry.dueAt <= now + this.tickMs);
    if (due.length === 0) return;
    const batch = due.map((entry) => ({ entry, text: entry.text! }));
    for (const { entry } of batch) {
      entry.text = null;
      entry.dueAt = now + this.intervalMs;
    }
    const writing = this.write(batch).finally(() => {
      this.writing = null;
      for (const { entry } of batch) if (entry.inFlight === writing) entry.inFlight = null;
    });
    this.writing = writing;
    for (const { entry } of batch) entry.inFlight = writing;
    await writing;
  }

  /** New drafts inserted and written ones rewritten, all in one statement; a failure leaves them to the next tick. */
  private async write(batch: { entry: Entry; text: string }[]): Promise<void> {
    const metadata = { incomplete: true, draft: true };
    const fresh = batch
      .filter(({ entry }) => !entry.written)
      .map(({ entry, text }) => ({
        id: entry.id,
        tenant_id: entry.owner.tenantId,
        session_id: entry.owner.sessionId,
        run_id: entry.owner.runId,
        subject: entry.owner.subject,
        model: entry.owner.model,
        content: text,
      }));
    const rewritten = batch.filter(({ entry }) => entry.written).map(({ entry, text }) => ({ id: entry.id, content: text }));
    try {
      // The rows travel as one JSON parameter each way, so a batch of any size is one statement of fixed shape. A
      // conversation deleted meanwhile (its tenant erased) gets no draft, and does not fail the others' writes.
      const { rows } = await sql<{ id: string }>`
        with fresh as (
          insert into messages (id, tenant_id, session_id, run_id, subject, role, content, model, metadata)
          select d.id, d.tenant_id, d.session_id, d.run_id, d.subject, 'assistant', d.content, d.model, ${JSON.stringify(metadata)}::jsonb
          from jsonb_to_recordset(${JSON.stringify(fresh)}::jsonb)
            as d(id uuid, tenant_id uuid, session_id uuid, run_id text, subject text, model text, content text)
          where exists (select 1 from sessions where sessions.id = d.session_id)
          returning id
        ), rewritten as (
          update messages set content = d.content
          from jsonb_to_recordset(${JSON.stringify(rewritten)}::jsonb) as d(id uuid, content text)
          where messages.id = d.id
        )
        select id from fresh`.execute(this.db);
      const inserted = new Set(rows.map((row) => row.id));
      for (const { entry } of batch) if (entry.written || inserted.has(entry.id)) entry.written = true;
    } catch (error) {
      this.logger.warn({ err: error, drafts: batch.length }, 'could not save the drafts of answers being streamed');
      // Offered again at the next tick, unless newer text came meanwhile or the step was settled.
      for (const { entry, text } of batch) {
        if (!entry.settledAlready && entry.text === null) entry.text = text;
      }
    }
  }
}
