import { describe, expect, it } from 'vitest';
import { dueFire, nextSlot, parseSchedule, type ScheduleSpec } from './schedule.js';

const now = new Date('2026-11-27T10:00:00Z');
const refusal = (input: Parameters<typeof parseSchedule>[0]) => {
  try {
    parseSchedule(input, now);
  } catch (error) {
    return (error as Error).message;
  }
  return 'accepted';
};

describe('schedule specs', () => {
  it('takes crons of 5, 6 and 7 fields in a time zone, blank meaning UTC', () => {
    expect(parseSchedule({ cron: '0 9 * * *', timezone: 'Europe/Paris' }, now)).toEqual({ kind: 'cron', cron: '0 9 * * *', timezone: 'Europe/Paris' });
    expect(nextSlot(parseSchedule({ cron: '0 9 * * *', timezone: 'Europe/Paris' }, now), now)).toEqual(new Date('2026-11-28T08:00:00Z'));
    expect(nextSlot(parseSchedule({ cron: '0 9 * * *', timezone: '' }, now), now)).toEqual(new Date('2026-11-28T09:00:00Z'));
    expect(nextSlot(parseSchedule({ cron: '30 0 12 * * *' }, now), now)).toEqual(new Date('2026-11-27T12:00:30Z'));
    expect(nextSlot(parseSchedule({ cron: '0 0 9 1 1 * 2028' }, now), now)).toEqual(new Date('2028-01-01T09:00:00Z'));
  });

  it('keeps a time zone as the IANA database spells it, whatever case it was given in', () => {
    expect(parseSchedule({ cron: '0 9 * * *', timezone: 'europe/paris' }, now)).toMatchObject({ timezone: 'Europe/Paris' });
    expect(parseSchedule({ cron: '0 9 * * *', timezone: ' utc ' }, now)).toMatchObject({ timezone: 'UTC' });
  });

  it('refuses what cannot or should not fire, each with a detail beginning "Invalid schedule spec:"', () => {
    expect(refusal({ cron: '61 * * * *' })).toBe('Invalid schedule spec: Invalid value for minute: 61');
    expect(refusal({ cron: '* * * *' })).toBe('Invalid schedule spec: a cron has 5 to 7 fields, this one has 4');
    expect(refusal({ cron: '0 0 0 * * * * *' })).toBe('Invalid schedule spec: a cron has 5 to 7 fields, this one has 8');
    expect(refusal({ cron: '0 9 * * *', timezone: 'Mars/Olympus' })).toBe(
      "Invalid schedule spec: unknown time zone 'Mars/Olympus'; use an IANA name such as Europe/Paris, or leave it blank for UTC",
    );
    expect(refusal({ cron: '0 0 30 2 *' })).toBe('Invalid schedule spec: this cron never fires');
    expect(refusal({ cron: '0 0 0 1 1 * 2020' })).toBe('Invalid schedule spec: this cron never fires');
    expect(refusal({ cron: '*/10 * * * * *' })).toBe('Invalid schedule spec: this cron fires more often than once every 60 seconds');
    expect(refusal({ cron: '0,30 0 * * * *' })).toBe('Invalid schedule spec: this cron fires more often than once every 60 seconds');
    expect(refusal({ interval_seconds: 59 })).toBe('Invalid schedule spec: interval_seconds must be at least 60');
    expect(refusal({ interval_seconds: 90.5 })).toBe('Invalid schedule spec: interval_seconds must be a whole number of seconds');
    expect(refusal({ interval_seconds: 40_000_000 })).toBe('Invalid schedule spec: interval_seconds must be at most 31622400 (a year)');
    expect(refusal({ run_at: '2026-11-27T09:00:00Z' })).toBe('Invalid schedule spec: run_at is in the past');
    expect(refusal({ run_at: 'tomorrow' })).toMatch(/^Invalid schedule spec: run_at must be an RFC 3339/);
    expect(refusal({ run_at: '2026-11-28T09:00:00' })).toMatch(/^Invalid schedule spec: run_at must be an RFC 3339/);
    expect(refusal({ run_at: '2027-02-30T09:00:00Z' })).toMatch(/^Invalid schedule spec: run_at must be an RFC 3339/);
    expect(refusal({ run_at: '2027-02-28T09:00:00Z' })).toBe('accepted');
    expect(refusal({})).toBe('Invalid schedule spec: give exactly one of cron, interval_seconds or run_at');
    expect(refusal({ cron: '0 9 * * *', interval_seconds: 3600 })).toBe('Invalid schedule spec: give exactly one of cron, interval_seconds or run_at');
    expect(refusal({ interval_seconds: 60 })).toBe('accepted');
  });

  it('keeps an interval in phase with its first slot', () => {
    const spec: ScheduleSpec = { kind: 'interval', intervalSeconds: 600 };
    const anchor = new Date('2026-11-27T09:00:00Z');
    expect(nextSlot(spec, new Date('2026-11-27T09:25:00Z'), anchor)).toEqual(new Date('2026-11-27T09:30:00Z'));
    expect(nextSlot(spec, new Date('2026-11-27T09:30:00Z'), anchor)).toEqual(new Date('2026-11-27T09:40:00Z'));
  });
});

describe('a due task', () => {
  const hourly = parseSchedule({ cron: '0 * * * *' }, now);
  const hour = 3_600_000;

  it('fires its slot when on time, and is next due at the following one', () => {
    expect(dueFire(hourly, new Date('2026-11-27T10:00:00Z'), new Date('2026-11-27T10:00:00.300Z'), hour)).toEqual({
      fire: new Date('2026-11-27T10:00:00Z'),
      next: new Date('2026-11-27T11:00:00Z'),
    });
  });

  it('fires once, for the latest missed slot within the catch-up window, after downtime', () => {
    // Down from 06:30 to 09:20: slots 07:00, 08:00 and 09:00 were missed; only 09:00 fires.
    expect(dueFire(hourly, new Date('2026-11-27T07:00:00Z'), new Date('2026-11-27T09:20:00Z'), hour)).toEqual({
      fire: new Date('2026-11-27T09:00:00Z'),
      next: new Date('2026-11-27T10:00:00Z'),
    });
  });

  it('skips missed slots older than the window, and fires a one-shot task late rather than never', () => {
    const daily = parseSchedule({ cron: '0 6 * * *' }, now);
    expect(dueFire(daily, new Date('2026-11-27T06:00:00Z'), new Date('2026-11-27T09:20:00Z'), hour)).toEqual({
      fire: null,
      next: new Date('2026-11-28T06:00:00Z'),
    });
    const once: ScheduleSpec = { kind: 'once', runAt: new Date('2026-11-27T06:00:00Z') };
    expect(dueFire(once, once.runAt, new Date('2026-11-27T09:20:00Z'), hour)).toEqual({ fire: once.runAt, next: null });
  });

  it('steps an interval the same way', () => {
    const spec: ScheduleSpec = { kind: 'interval', intervalSeconds: 600 };
    expect(dueFire(spec, new Date('2026-11-27T09:00:00Z'), new Date('2026-11-27T09:35:00Z'), hour)).toEqual({
      fire: new Date('2026-11-27T09:30:00Z'),
      next: new Date('2026-11-27T09:40:00Z'),
    });
  });
});
