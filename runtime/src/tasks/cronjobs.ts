// Scheduled tasks as CronJobs on Kubernetes (DESIGN.md Scheduler; docs/decisions/0066). A task whose schedule a
// CronJob can express (a 5-field cron in a time zone) gets one in the project's namespace, written by the runtime,
// which owns tasks and learns of each change in the request that makes it:
// - made when the task is, deleted when it is cancelled, its owner forgotten or its tenant erased (before any row);
// - a reconcile pass every minute or so makes what is missing, mends what differs and prunes orphans;
// - each Job runs the fire container (`entrypoint.sh fire`, ../fire.ts), which asks this runtime to fire the Job's
//   slot with the project's fire key; the scheduler fires a slot once however many Jobs ask (./scheduler.ts).
// A task is marked `on_cronjob` only once its CronJob exists: until then, and for every other schedule, the database
// scheduler fires it, and it fires a CronJob's slot too when no Job did in time. An API server out of reach costs
// promptness of the cleanup, never a fire.
import { createHash } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import type { Kysely } from 'kysely';
import { LABELS, TASK_FIRE_COMPONENT } from '@agentplane/lib/kubernetes/resources';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeSchema } from '../store/schema.js';
import { specOf, type ScheduleSpec } from './schedule.js';

/** Where the CronJobs go and what their Jobs run: the operator sets these on the runtime's Deployment. */
export interface CronJobSettings {
  namespace: string;
  /** The agentplane image, whose entrypoint runs the fire program. */
  image: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  /** Where a Job's Pod reaches this runtime (the project's Service). */
  fireUrl: string;
  /** The Secret key holding the fire key, which the Pod presents. */
  fireKeySecret: { name: string; key: string };
  /** How often the reconcile pass runs. */
  reconcileMs: number;
}

/** The labels our CronJobs carry: the reconcile lists by the component, an erase deletes by the tenant. */
export const CRONJOB_LABELS = {
  component: LABELS.component,
  managedBy: LABELS.managedBy,
  task: 'agentplane.io/task',
  tenant: 'agentplane.io/tenant',
} as const;
const MANAGED_BY = 'agentplane-runtime';
const SPEC_HASH_ANNOTATION = 'agentplane.io/spec-hash';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const OURS = `${CRONJOB_LABELS.component}=${TASK_FIRE_COMPONENT},${CRONJOB_LABELS.managedBy}=${MANAGED_BY}`;
/** A Job not started this long after its slot is not started at all; the database scheduler fires the slot. */
export const STARTING_DEADLINE_SECONDS = 60;
/** The image's own user (Dockerfile `USER 10001:10001`), stated so the kubelet can verify it is not root. */
const IMAGE_USER_ID = 10001;

/** The CronJob a task's spec becomes, or null when only the database scheduler can keep it. */
export function cronJobSchedule(spec: ScheduleSpec): { schedule: string; timeZone: string } | null {
  if (spec.kind !== 'cron') return null;
  const fields = spec.cron.split(' ');
  if (fields.length !== 5 || !fields.every((field, i) => fieldIsPortable(field, i))) return null;
  return { schedule: spec.cron, timeZone: spec.timezone === '' ? 'Etc/UTC' : spec.timezone };
}

/**
 * Whether one field means the same to croner and to the CronJob controller: numbers, `*`, ranges, steps and lists,
 * and month and weekday names. croner's `L`, `W`, `#` and `?`, its Sunday as 7, and a day field that starts with `*`
 * without being `*` are left to the database.
 */
const FIELD_RANGES: readonly (readonly [number, number])[] = [
  [0, 59],
  [0, 23],
  [1, 31],
  [1, 12],
  [0, 6],
];
function fieldIsPortable(field: string, index: number): boolean {
  const [min, max] = FIELD_RANGES[index]!;
  // Day of month and weekday: croner takes a field for "any day" only when it is `*` itself, the controller also when
  // it starts with `*` (`*/1`, `*,5`), and both combine two restricted ones with OR: so `*` stands alone there.
  if ((index === 2 || index === 4) && field !== '*' && field.includes('*')) return false;
  const names = index === 3 || index === 4 ? '|[a-z]{3}' : '';
  const item = new RegExp(`^(\\*|(\\d{1,2}${names})(-(\\d{1,2}${names}))?)(/\\d{1,2})?$`, 'i');
  return field.split(',').every((part) => {
    const match = item.exec(part);
    if (!match) return false;
    return [match[2], match[4]].every((bound) => bound === undefined || !/^\d+$/.test(bound) || (Number(bound) >= min && Number(bound) <= max));
  });
}

/** CronJob names: `task-` and the task's id (41 characters; the controller adds 11 for each Job, under 63). */
export const cronJobName = (taskId: string) => `task-${taskId}`;

export interface CronJobTask {
  id: string;
  tenantId: string;
  schedule: string;
  timeZone: string;
}

/** A task's CronJob, pure: the same task and settings give the same object, whose hash says so. */
export function buildTaskCronJob(task: CronJobTask, settings: CronJobSettings): k8s.V1CronJob {
  const labels = {
    [CRONJOB_LABELS.component]: TASK_FIRE_COMPONENT,
    [CRONJOB_LABELS.managedBy]: MANAGED_BY,
    [CRONJOB_LABELS.task]: task.id,
    [CRONJOB_LABELS.tenant]: task.tenantId,
  };
  const spec: k8s.V1CronJobSpec = {
    schedule: task.schedule,
    timeZone: task.timeZone,
    // One fire at a time, as the database scheduler does; a slot the Job missed is the database's to fire.
    concurrencyPolicy: 'Forbid',
    startingDeadlineSeconds: STARTING_DEADLINE_SECONDS,
    successfulJobsHistoryLimit: 1,
    failedJobsHistoryLimit: 1,
    jobTemplate: {
      metadata: { labels },
      spec: {
        // The runtime answers 5xx only when it could not fire: a retry may. A fire that started answers 2xx.
        backoffLimit: 2,
        activeDeadlineSeconds: 300,
        ttlSecondsAfterFinished: 600,
        template: {
          metadata: { labels },
          spec: {
            restartPolicy: 'Never',
            automountServiceAccountToken: false,
            enableServiceLinks: false,
            securityContext: { runAsNonRoot: true, runAsUser: IMAGE_USER_ID, runAsGroup: IMAGE_USER_ID, seccompProfile: { type: 'RuntimeDefault' } },
            containers: [
              {
                name: 'fire',
                image: settings.image,
                imagePullPolicy: settings.imagePullPolicy,
                args: ['fire'],
                env: [
                  { name: 'RUNTIME_URL', value: settings.fireUrl },
                  { name: 'TASK_ID', value: task.id },
                  // The controller names each Job after its slot (minutes since the epoch): the slot this Job fires.
                  { name: 'JOB_NAME', valueFrom: { fieldRef: { fieldPath: "metadata.labels['batch.kubernetes.io/job-name']" } } },
                  { name: 'TASK_FIRE_KEY', valueFrom: { secretKeyRef: { name: settings.fireKeySecret.name, key: settings.fireKeySecret.key } } },
                ],
                resources: { requests: { cpu: '10m', memory: '48Mi' }, limits: { cpu: '250m', memory: '128Mi' } },
                securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } },
              },
            ],
          },
        },
      },
    },
  };
  return {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name: cronJobName(task.id), namespace: settings.namespace, labels, annotations: { [SPEC_HASH_ANNOTATION]: hashOf(spec) } },
    spec,
  };
}

const hashOf = (spec: k8s.V1CronJobSpec) => createHash('sha256').update(JSON.stringify(spec)).digest('hex').slice(0, 32);

/** The CronJobs of one namespace, as the reconcile needs them (the Kubernetes adapter is below). */
export interface CronJobStore {
  /** Ours only: name, task and spec hash. */
  list(): Promise<{ name: string; taskId: string; hash: string | undefined }[]>;
  /** Creates it, or replaces one whose spec differs; answers whether anything was written. */
  apply(job: k8s.V1CronJob): Promise<boolean>;
  /** Deletes it and its Jobs; one already gone is fine. */
  delete(name: string): Promise<void>;
  /** Deletes a tenant's, with their Jobs. */
  deleteOfTenant(tenantId: string): Promise<void>;
}

export interface TaskCronJobsOptions {
  db: Kysely<RuntimeSchema>;
  store: CronJobStore;
  settings: CronJobSettings;
  logger: Logger;
}

export class TaskCronJobs {
  private timer: NodeJS.Timeout | undefined;
  private reconciling: Promise<void> | undefined;
  /** Each task's changes, in order: a cancel's delete never overtakes its create's apply. */
  private readonly chains = new Map<string, Promise<void>>();
  /** Tasks whose CronJob the API server refused as invalid, with the spec it refused. */
  private readonly refused = new Map<string, string>();
  private warned = false;

  constructor(private readonly options: TaskCronJobsOptions) {}

  start(): void {
    this.schedule(0);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.reconciling;
    await Promise.all(this.chains.values());
  }

  /** A task was made or cancelled here: its CronJob follows now, in the background (the reconcile mends a failure). */
  taskChanged(taskId: string): void {
    const previous = this.chains.get(taskId) ?? Promise.resolve();
    const next = previous
      .then(() => this.sync(taskId))
      .catch((err: unknown) => this.failed(err, 'could not bring a task\'s CronJob up to date', { task_id: taskId }))
      .finally(() => {
        if (this.chains.get(taskId) === next) this.chains.delete(taskId);
      });
    this.chains.set(taskId, next);
  }

  /** Waits for the changes asked of this process so far (tests, and the erase before it deletes a tenant's). */
  async settled(): Promise<void> {
    await Promise.all(this.chains.values());
  }

  /**
   * A tenant's CronJobs deleted (its erase's first step, after its tasks were cancelled). A tenant none of whose tasks
   * ever got one asks nothing of the API server, so an erase never waits on an API server this runtime cannot reach
   * when there is nothing there to delete.
   */
  async removeTenant(tenantId: string): Promise<void> {
    await this.settled();
    const any = await this.options.db.selectFrom('tasks').select('id').where('tenant_id', '=', tenantId).where('on_cronjob', '=', true).executeTakeFirst();
    if (any) await this.options.store.deleteOfTenant(tenantId);
  }

  /** Some tasks' CronJobs deleted (their owner forgotten). */
  async remove(taskIds: string[]): Promise<void> {
    await this.settled();
    for (const id of taskIds) await this.options.store.delete(cronJobName(id));
  }

  /**
   * One pass: CronJobs whose task is gone, ended or no longer expressible are deleted (listed before the tasks are
   * read, so a task made meanwhile is seen with its CronJob); missing or differing ones are applied; and each
   * scheduled task's `on_cronjob` is set to whether its CronJob exists now. Writes nothing when all is as it should be.
   */
  async reconcile(): Promise<{ applied: number; pruned: number }> {
    const { db, store, settings } = this.options;
    const existing = await store.list();
    const rows = await db
      .selectFrom('tasks')
      .select(['id', 'tenant_id', 'cron', 'timezone', 'interval_seconds', 'run_at', 'on_cronjob'])
      .where('status', '=', 'scheduled')
      .where('cron', 'is not', null)
      .execute();
    const desired = new Map<string, k8s.V1CronJob>();
    for (const row of rows) {
      const schedule = cronJobSchedule(specOf(row));
      if (schedule) desired.set(row.id, buildTaskCronJob({ id: row.id, tenantId: row.tenant_id, ...schedule }, settings));
    }
    let pruned = 0;
    const present = new Set<string>();
    for (const job of existing) {
      const wanted = desired.get(job.taskId);
      if (wanted && job.name === cronJobName(job.taskId)) {
        if (job.hash === wanted.metadata!.annotations![SPEC_HASH_ANNOTATION]) present.add(job.taskId);
        continue;
      }
      // A task made since the list was taken has its CronJob too: an orphan is only one whose task is not scheduled
      // now, so its row is read again before it goes.
      const task = await db.selectFrom('tasks').select(['status', 'cron']).where('id', '=', job.taskId).executeTakeFirst();
      if (task?.status === 'scheduled' && task.cron !== null && job.name === cronJobName(job.taskId)) continue;
      await store.delete(job.name);
      pruned++;
    }
    let applied = 0;
    for (const [taskId, wanted] of desired) {
      if (present.has(taskId)) continue;
      try {
        if (await this.applyOnce(taskId, wanted)) {
          applied++;
          present.add(taskId);
        }
      } catch (err) {
        this.failed(err, 'could not apply a task\'s CronJob; the database scheduler fires it meanwhile', { task_id: taskId });
      }
    }
    // Marked only while the CronJob exists: a task whose CronJob could not be made stays the database's.
    const marking = rows.filter((row) => present.has(row.id) && !row.on_cronjob).map((row) => row.id);
    const unmarking = rows.filter((row) => !present.has(row.id) && row.on_cronjob).map((row) => row.id);
    if (marking.length > 0) await db.updateTable('tasks').set({ on_cronjob: true }).where('id', 'in', marking).where('status', '=', 'scheduled').execute();
    if (unmarking.length > 0) await db.updateTable('tasks').set({ on_cronjob: false }).where('id', 'in', unmarking).execute();
    return { applied, pruned };
  }

  private async sync(taskId: string): Promise<void> {
    const { db, store, settings } = this.options;
    const task = await db.selectFrom('tasks').select(['id', 'tenant_id', 'status', 'cron', 'timezone', 'interval_seconds', 'run_at', 'on_cronjob']).where('id', '=', taskId).executeTakeFirst();
    const schedule = task && task.status === 'scheduled' ? cronJobSchedule(specOf(task)) : null;
    if (!task || !schedule) {
      // Only a task that had one has one to delete (an orphan of a lost race is the reconcile's).
      if (!task || task.on_cronjob) await store.delete(cronJobName(taskId));
      return;
    }
    const job = buildTaskCronJob({ id: task.id, tenantId: task.tenant_id, ...schedule }, settings);
    if (!(await this.applyOnce(task.id, job))) return;
    // Left to the CronJob from now on. Marked even if cancelled meanwhile (its delete is next in the chain): a mark
    // is what tells a tenant's erase there is a CronJob to delete.
    await db.updateTable('tasks').set({ on_cronjob: true }).where('id', '=', taskId).execute();
  }

  /**
   * Applies a task's CronJob; answers whether it exists now. One the API server refused as invalid (a zone its tzdata
   * lacks) is not asked for again until its spec changes: the database scheduler fires that task.
   */
  private async applyOnce(taskId: string, job: k8s.V1CronJob): Promise<boolean> {
    const hash = job.metadata!.annotations![SPEC_HASH_ANNOTATION]!;
    if (this.refused.get(taskId) === hash) return false;
    try {
      await this.options.store.apply(job);
      this.refused.delete(taskId);
      return true;
    } catch (err) {
      const status = (err as { code?: unknown }).code;
      if (status === 400 || status === 422) {
        this.refused.set(taskId, hash);
        this.options.logger.warn({ err, task_id: taskId }, "the API server refused a task's CronJob; the database scheduler fires the task");
        return false;
      }
      throw err;
    }
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.reconciling = this.reconcile()
        .then((report) => {
          if (report.applied > 0 || report.pruned > 0) this.options.logger.info(report, 'task CronJobs reconciled');
        })
        .catch((err: unknown) => this.failed(err, 'reconciling task CronJobs failed'))
        .finally(() => {
          this.reconciling = undefined;
          if (this.timer !== undefined) this.schedule(this.options.settings.reconcileMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** The first failure is a warning (the API server may be out of reach: the database scheduler fires meanwhile). */
  private failed(err: unknown, message: string, fields: Record<string, unknown> = {}): void {
    const level = this.warned ? 'debug' : 'warn';
    this.warned = true;
    this.options.logger[level]({ err, ...fields }, message);
  }
}

/** The CronJob store of one namespace on the Kubernetes API, as this process's ServiceAccount (or a kubeconfig). */
export async function kubernetesCronJobStore(namespace: string, kubeconfigPath?: string): Promise<CronJobStore> {
  // Loaded only where CronJobs are wanted: the embedded default starts without client-node.
  const k8s = await import('@kubernetes/client-node');
  const { withCallDeadline } = await import('@agentplane/lib/kubernetes/kube-config');
  const source = new k8s.KubeConfig();
  if (kubeconfigPath) source.loadFromFile(kubeconfigPath);
  else source.loadFromDefault();
  const batch = withCallDeadline(source).makeApiClient(k8s.BatchV1Api);
  const status = (error: unknown) => (error as { code?: unknown })?.code;
  const gone = (error: unknown) => {
    if (status(error) !== 404) throw error;
  };
  return {
    async list() {
      const jobs: { name: string; taskId: string; hash: string | undefined }[] = [];
      let next: string | undefined;
      do {
        const page = await batch.listNamespacedCronJob({ namespace, labelSelector: OURS, limit: 500, ...(next ? { _continue: next } : {}) });
        for (const job of page.items) {
          const taskId = job.metadata?.labels?.[CRONJOB_LABELS.task];
          // Ours carry a task id; anything else with our labels is not ours to read or prune.
          if (job.metadata?.name && taskId && UUID.test(taskId)) jobs.push({ name: job.metadata.name, taskId, hash: job.metadata.annotations?.[SPEC_HASH_ANNOTATION] });
        }
        next = page.metadata?._continue || undefined;
      } while (next);
      return jobs;
    },
    async apply(job) {
      const name = job.metadata!.name!;
      try {
        await batch.createNamespacedCronJob({ namespace, body: job });
        return true;
      } catch (error) {
        if (status(error) !== 409) throw error;
      }
      const current = await batch.readNamespacedCronJob({ name, namespace });
      if (current.metadata?.annotations?.[SPEC_HASH_ANNOTATION] === job.metadata!.annotations![SPEC_HASH_ANNOTATION]) return false;
      await batch.replaceNamespacedCronJob({ name, namespace, body: { ...job, metadata: { ...job.metadata, resourceVersion: current.metadata!.resourceVersion! } } });
      return true;
    },
    async delete(name) {
      await batch.deleteNamespacedCronJob({ name, namespace, propagationPolicy: 'Background' }).catch(gone);
    },
    async deleteOfTenant(tenantId) {
      // One by one: the chart grants the runtime `delete`, not `deletecollection`.
      const page = await batch.listNamespacedCronJob({ namespace, labelSelector: `${OURS},${CRONJOB_LABELS.tenant}=${tenantId}` });
      for (const job of page.items) await batch.deleteNamespacedCronJob({ name: job.metadata!.name!, namespace, propagationPolicy: 'Background' }).catch(gone);
    },
  };
}
