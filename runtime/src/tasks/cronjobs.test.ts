// Which schedules become CronJobs (those that mean the same to croner and to the CronJob controller), the CronJob a
// task becomes, and the slot the fire program reads from its Job's name.
import { describe, expect, it } from 'vitest';
import { slotOfJob } from '../fire.js';
import { buildTaskCronJob, cronJobSchedule } from './cronjobs.js';

const cron = (expression: string, timezone = '') => cronJobSchedule({ kind: 'cron', cron: expression, timezone });
const settings = {
  namespace: 'agentplane-p-x',
  image: 'ghcr.io/agentplane/agentplane:1.0.0',
  imagePullPolicy: 'IfNotPresent' as const,
  fireUrl: 'http://agent-runtime:8081',
  fireKeySecret: { name: 'agentplane-runtime', key: 'task-fire-key' },
  reconcileMs: 60_000,
};

describe('cronJobSchedule', () => {
  it('takes 5-field crons of numbers, ranges, steps, lists and names, in their zone (blank is UTC)', () => {
    expect(cron('0 9 * * 1-5', 'Europe/Paris')).toEqual({ schedule: '0 9 * * 1-5', timeZone: 'Europe/Paris' });
    expect(cron('*/15 8-18 * jan-mar MON,wed')).toEqual({ schedule: '*/15 8-18 * jan-mar MON,wed', timeZone: 'Etc/UTC' });
    expect(cron('0 0 1,15 */2 0')).not.toBeNull();
  });

  it("leaves to the database what the CronJob controller reads differently or not at all", () => {
    // croner reads `*/1` or `*,5` in a day field as restricting it (so OR with the other day field), the controller as
    // any day: every day here, Mondays only there.
    for (const expression of ['0 9 */1 * 1', '0 9 *,5 * 1', '0 9 15 * */1', '0 0 9 * * *', '0 9 * * * 2027', '0 9 * * 7', '0 0 L * *', '0 9 ? * *', '0 9 1W * *', '0 9 * * 5#3', '0 9 * * mon-7', '60 * * * *', '0 9 32 * *', '0 9 * 13 *']) {
      expect(cron(expression), expression).toBeNull();
    }
    expect(cronJobSchedule({ kind: 'interval', intervalSeconds: 3600 })).toBeNull();
    expect(cronJobSchedule({ kind: 'once', runAt: new Date() })).toBeNull();
  });
});

describe('buildTaskCronJob', () => {
  const task = { id: '0b5e3c1a-9f1e-4c1d-8e7a-2f3b4c5d6e7f', tenantId: '7c9e6679-7425-40de-944b-e07fc1f90ae7', schedule: '0 9 * * *', timeZone: 'Etc/UTC' };

  it('is the same object for the same task and settings, and its hash changes with what the Job runs', () => {
    const one = buildTaskCronJob(task, settings);
    expect(buildTaskCronJob(task, settings)).toEqual(one);
    const upgraded = buildTaskCronJob(task, { ...settings, image: 'ghcr.io/agentplane/agentplane:1.1.0' });
    expect(upgraded.metadata!.annotations!['agentplane.io/spec-hash']).not.toBe(one.metadata!.annotations!['agentplane.io/spec-hash']);
  });

  it('fits the CronJob and Job name limits (52 and 63 characters)', () => {
    const name = buildTaskCronJob(task, settings).metadata!.name!;
    expect(name.length).toBeLessThanOrEqual(52);
    expect(`${name}-${Math.floor(Date.now() / 60_000)}`.length).toBeLessThanOrEqual(63);
  });
});

describe('slotOfJob', () => {
  it("reads the slot from the controller's Job name (minutes since the epoch)", () => {
    const slot = new Date('2026-11-27T09:30:00Z');
    expect(slotOfJob(`task-${'0'.repeat(36)}-${slot.getTime() / 60_000}`)).toEqual(slot);
    expect(slotOfJob('task-manual-run')).toBeNull();
  });
});
