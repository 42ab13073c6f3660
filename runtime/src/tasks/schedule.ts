// When a scheduled task fires (SPEC.md Task, Errors 7; docs/decisions/0058): a cron of 5 to 7 fields in an IANA time
// zone (blank is UTC), a fixed interval, or one moment. Parsed with croner, never by hand. A spec that cannot fire,
// fires more often than once a minute, or names an unknown zone is refused with a 400 whose detail begins
// `Invalid schedule spec:`, which SPEC.md tells clients not to retry. Pure: the clock is a parameter.
import { Cron } from 'croner';
import { invalidArgument } from '@agentplane/lib/errors';

/** The shortest gap between two fires, for an interval and for a cron alike. */
export const MIN_INTERVAL_SECONDS = 60;
/** The longest interval: a year. */
export const MAX_INTERVAL_SECONDS = 366 * 86_400;
/** How far ahead a one-shot task may be set. */
export const MAX_RUN_AT_AHEAD_MS = 366 * 86_400_000;

export type ScheduleSpec =
  | { kind: 'cron'; cron: string; timezone: string }
  | { kind: 'interval'; intervalSeconds: number }
  | { kind: 'once'; runAt: Date };

export interface ScheduleInput {
  cron?: string | null | undefined;
  timezone?: string | null | undefined;
  interval_seconds?: number | null | undefined;
  run_at?: string | null | undefined;
}

const invalidSpec = (why: string) => invalidArgument(`Invalid schedule spec: ${why}`, { code: 'invalid_schedule' });

/** The spec a task's fields describe, checked; throws 400 `Invalid schedule spec: ...`. */
export function parseSchedule(input: ScheduleInput, now: Date): ScheduleSpec {
  const given = [input.cron, input.interval_seconds, input.run_at].filter((value) => value !== undefined && value !== null);
  if (given.length !== 1) throw invalidSpec('give exactly one of cron, interval_seconds or run_at');
  const zone = (input.timezone ?? '').trim();
  const timezone = zone === '' ? '' : canonicalZone(zone);
  if (timezone === null) throw invalidSpec(`unknown time zone '${zone}'; use an IANA name such as Europe/Paris, or leave it blank for UTC`);
  if (input.cron !== undefined && input.cron !== null) {
    const cron = input.cron.trim().replace(/\s+/g, ' ');
    const fields = cron.split(' ').length;
    if (fields < 5 || fields > 7) throw invalidSpec(`a cron has 5 to 7 fields, this one has ${fields}`);
    const spec: ScheduleSpec = { kind: 'cron', cron, timezone };
    let job: Cron;
    try {
      job = cronOf(spec);
    } catch (error) {
      throw invalidSpec(cronFault(error));
    }
    // The gaps between its next fires: a seconds field can ask for more than a fire a minute, in bursts too.
    const runs = job.nextRuns(16, now);
    if (runs.length === 0) throw invalidSpec('this cron never fires');
    if (runs.some((run, i) => i > 0 && run.getTime() - runs[i - 1]!.getTime() < MIN_INTERVAL_SECONDS * 1000)) {
      throw invalidSpec(`this cron fires more often than once every ${MIN_INTERVAL_SECONDS} seconds`);
    }
    return spec;
  }
  if (input.interval_seconds !== undefined && input.interval_seconds !== null) {
    const seconds = input.interval_seconds;
    if (!Number.isInteger(seconds)) throw invalidSpec('interval_seconds must be a whole number of seconds');
    if (seconds < MIN_INTERVAL_SECONDS) throw invalidSpec(`interval_seconds must be at least ${MIN_INTERVAL_SECONDS}`);
    if (seconds > MAX_INTERVAL_SECONDS) throw invalidSpec(`interval_seconds must be at most ${MAX_INTERVAL_SECONDS} (a year)`);
    return { kind: 'interval', intervalSeconds: seconds };
  }
  const runAt = new Date(input.run_at!);
  const written = /^(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i.exec(input.run_at!);
  // A day the month does not have (30 February) is refused, not rolled into the next month as Date would.
  const realDay = written !== null && Number(written[3]) <= new Date(Date.UTC(Number(written[1]), Number(written[2]), 0)).getUTCDate();
  if (!written || !realDay || Number.isNaN(runAt.getTime())) {
    throw invalidSpec('run_at must be an RFC 3339 date and time with its offset, such as 2026-12-01T09:00:00Z');
  }
  if (runAt.getTime() <= now.getTime()) throw invalidSpec('run_at is in the past');
  if (runAt.getTime() - now.getTime() > MAX_RUN_AT_AHEAD_MS) throw invalidSpec('run_at is more than a year ahead');
  return { kind: 'once', runAt };
}

/** The spec of a stored task (checked when it was made). */
export function specOf(task: { cron: string | null; timezone: string; interval_seconds: number | null; run_at: Date | null }): ScheduleSpec {
  if (task.cron !== null) return { kind: 'cron', cron: task.cron, timezone: task.timezone };
  if (task.interval_seconds !== null) return { kind: 'interval', intervalSeconds: task.interval_seconds };
  return { kind: 'once', runAt: task.run_at! };
}

/** The first slot strictly after `after`; null when the spec has none (a one-shot task, a cron whose years are over). */
export function nextSlot(spec: ScheduleSpec, after: Date, anchor?: Date): Date | null {
  if (spec.kind === 'once') return spec.runAt.getTime() > after.getTime() ? spec.runAt : null;
  if (spec.kind === 'interval') {
    // Slots keep their phase: anchor + k × interval, the first one past `after`.
    const step = spec.intervalSeconds * 1000;
    const start = (anchor ?? after).getTime();
    const k = Math.max(1, Math.floor((after.getTime() - start) / step) + 1);
    return new Date(start + k * step);
  }
  return cronOf(spec).nextRun(after);
}

/**
 * What a due task does now (docs/decisions/0058, missed slots). `slot` is the one it was due at. A recurring task
 * behind by more than `catchUpMs` (the service was down) fires once, for its latest missed slot, if that lies within
 * `catchUpMs`; it never fires a burst. A one-shot task fires late rather than never. `next` is the slot after now.
 */
export function dueFire(spec: ScheduleSpec, slot: Date, now: Date, catchUpMs: number): { fire: Date | null; next: Date | null } {
  if (spec.kind === 'once') return { fire: slot, next: null };
  let latest = slot;
  // The latest slot not after now: stepping from the last one due (at most catchUp / MIN_INTERVAL steps once past
  // the window's start, since earlier slots are skipped without being stepped through).
  const windowStart = new Date(now.getTime() - catchUpMs);
  if (latest.getTime() < windowStart.getTime()) {
    const inWindow = nextSlot(spec, new Date(windowStart.getTime() - 1), slot);
    if (!inWindow || inWindow.getTime() > now.getTime()) return { fire: null, next: nextSlot(spec, now, slot) };
    latest = inWindow;
  }
  for (;;) {
    const following = nextSlot(spec, latest, slot);
    if (!following || following.getTime() > now.getTime()) return { fire: latest, next: following ?? null };
    latest = following;
  }
}

function cronOf(spec: Extract<ScheduleSpec, { kind: 'cron' }>): Cron {
  return new Cron(spec.cron, { paused: true, ...(spec.timezone === '' ? { timezone: 'Etc/UTC' } : { timezone: spec.timezone }) });
}

/** croner's complaint, without its class prefix: "Invalid value for minute: 61". */
function cronFault(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.replace(/^Cron\w*:\s*/, '').replace(/\.$/, '');
}

/**
 * The zone's name as the IANA database spells it (`europe/paris` is `Europe/Paris`), which a CronJob's `timeZone`
 * needs (the API server reads names case-sensitively); null for a name that is none.
 */
function canonicalZone(name: string): string | null {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}
