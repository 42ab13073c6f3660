// The fire container's program (`entrypoint.sh fire`; docs/decisions/0066): a task's CronJob runs it in each Job,
// and it asks the project's runtime to fire the Job's slot. Tiny on purpose: Node's own modules only, no app loaded.
// - The slot is read from the Job's name, which the CronJob controller makes from the scheduled time in minutes since
//   the epoch (`<cronjob>-<minutes>`), so a Job made twice for one slot asks for the same slot.
// - Exits 0 when the runtime fired the slot or says why it fired nothing (the slot fired already, the task ended):
//   a retry would not change that. Exits 1 when the runtime could not be reached or answered 5xx, so the Job's
//   backoff tries again; the scheduler fires each slot once however often it is asked.
const TIMEOUT_MS = 30_000;

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    console.error(`fire: ${name} is not set`);
    process.exit(2);
  }
  return value;
}

/** The slot a CronJob's Job was made for, from its name's last part (minutes since the epoch). */
export function slotOfJob(jobName: string): Date | null {
  const minutes = /-(\d{1,12})$/.exec(jobName)?.[1];
  return minutes === undefined ? null : new Date(Number(minutes) * 60_000);
}

async function main(): Promise<number> {
  const runtimeUrl = required('RUNTIME_URL').replace(/\/+$/, '');
  const taskId = required('TASK_ID');
  const jobName = required('JOB_NAME');
  const key = required('TASK_FIRE_KEY');
  const slot = slotOfJob(jobName);
  if (!slot) {
    console.error(`fire: cannot read a slot from the Job name '${jobName}'`);
    return 2;
  }
  let response: Response;
  try {
    response = await fetch(`${runtimeUrl}/internal/tasks/${encodeURIComponent(taskId)}/fires`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-fire-key': key },
      body: JSON.stringify({ slot: slot.toISOString() }),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    console.error(`fire: task ${taskId} slot ${slot.toISOString()}: the runtime could not be reached: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
  const text = (await response.text()).slice(0, 2_000);
  console.log(`fire: task ${taskId} slot ${slot.toISOString()}: ${response.status} ${text}`);
  return response.status >= 500 ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main();
}
