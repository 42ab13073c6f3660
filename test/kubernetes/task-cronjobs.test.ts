// Scheduled tasks as CronJobs on a real API server (docs/decisions/0066): the runtime, acting as its ServiceAccount
// under the chart's runtime ClusterRole, writes a CronJob for each task a CronJob can express; kube-controller-manager's
// CronJob controller makes the slot's Job and kwok runs its Pod; the test plays the fire container (the real program,
// with the Pod's own environment) against the runtime, twice, and the slot fires once. Cancelled tasks' CronJobs go,
// orphans are pruned, a tenant erase deletes its CronJobs, and a slot no Job fired is fired by the database scheduler.
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTaskCronJob, cronJobName } from '@agentplane/runtime/tasks/cronjobs';
import { renderChart, serviceAccountKubeconfig } from '../chart/install.js';
import { chatWorld, CHAT_CAPABILITIES, eventually, type ChatWorld } from '../chat/fixture.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { typeScriptNodeArgs } from '../harness/process.js';

const binaries = kubernetesBinaries();
const namespace = 'agentplane-p-tasks';
const fireKey = randomBytes(32).toString('hex');
const capabilities = [...CHAT_CAPABILITIES, 'tasks:read', 'tasks:write'];
const settings = {
  namespace,
  image: 'ghcr.io/agentplane/agentplane:test',
  imagePullPolicy: 'IfNotPresent' as const,
  fireUrl: 'http://agent-runtime:8081',
  fireKeySecret: { name: 'agentplane-runtime', key: 'task-fire-key' },
  reconcileMs: 2_000,
};

interface Task {
  id: string;
  status: string;
  run_count: number;
  next_run_at: string | null;
  last_run_id: string | null;
}

/** Runs the fire program as the Job's container would, with `env`; answers its exit code and output. */
function playFire(env: Record<string, string>): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...typeScriptNodeArgs, 'runtime/src/fire.ts'], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, output }));
  });
}

describe.skipIf(!binaries)('scheduled tasks as CronJobs on a real API server', () => {
  let cluster: KubernetesCluster;
  let batch: k8s.BatchV1Api;
  let core: k8s.CoreV1Api;
  let world: ChatWorld;
  let alice: string;

  const send = (token: string, method: string, path: string, body?: unknown) =>
    world.rt.endUser(path, token, { method, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const create = async (body: Record<string, unknown>) => {
    const res = await send(alice, 'POST', '/tasks', { prompt: 'Summarise the queue.', ...body });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as Task;
  };
  const read = async (id: string) => (await (await send(alice, 'GET', `/tasks/${id}`)).json()) as Task;
  const cronJob = (taskId: string): Promise<k8s.V1CronJob | null> =>
    batch.readNamespacedCronJob({ name: cronJobName(taskId), namespace }).catch((error: { code?: number }) => (error.code === 404 ? null : Promise.reject(error)));
  const cronJobOf = async (taskId: string) => (await eventually(() => cronJob(taskId), `the CronJob of task ${taskId}`))!;
  const ours = async () => (await batch.listNamespacedCronJob({ namespace, labelSelector: 'app.kubernetes.io/component=task-fire' })).items.map((job) => job.metadata!.name!);
  const onCronJob = async (id: string) => (await world.rt.runtime.database.db.selectFrom('tasks').select('on_cronjob').where('id', '=', id).executeTakeFirstOrThrow()).on_cronjob;
  const fires = (id: string) => world.rt.runtime.database.db.selectFrom('task_fires').select(['slot', 'run_id']).where('task_id', '=', id).execute();
  const fire = (taskId: string, slot: string, key = fireKey) =>
    fetch(`${world.rt.url}/internal/tasks/${taskId}/fires`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-fire-key': key }, body: JSON.stringify({ slot }) });

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!);
    batch = cluster.kubeConfig().makeApiClient(k8s.BatchV1Api);
    core = cluster.kubeConfig().makeApiClient(k8s.CoreV1Api);
    // What the operator makes in a project namespace, as far as tasks need it: the runtime's ServiceAccount bound to
    // the chart's runtime ClusterRole, and the Secret holding the fire key.
    const [clusterRole] = await renderChart(binaries!.helm, { args: ['--show-only', 'templates/runtime-clusterrole.yaml'] });
    const apply = async (object: unknown) => {
      const result = await cluster.kubectl(['apply', '-f', '-'], { input: JSON.stringify(object) });
      if (result.code !== 0) throw new Error(result.stderr);
    };
    await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    await apply(clusterRole);
    await apply({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'agent-runtime', namespace } });
    await apply({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'agent-runtime', namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole!.metadata.name },
      subjects: [{ kind: 'ServiceAccount', name: 'agent-runtime', namespace }],
    });
    await apply({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'agentplane-runtime', namespace }, stringData: { 'task-fire-key': fireKey } });
    const kubeconfig = await serviceAccountKubeconfig(cluster, namespace, 'agent-runtime');
    world = await chatWorld({
      SCHEDULER_TICK_MS: '100',
      TASK_CRONJOBS: 'true',
      KUBECONFIG: kubeconfig,
      KUBERNETES_NAMESPACE: namespace,
      TASK_FIRE_IMAGE: settings.image,
      TASK_FIRE_URL: settings.fireUrl,
      TASK_FIRE_KEY: fireKey,
      TASK_CRONJOB_RECONCILE_SECONDS: '2',
      // Shorter than the CronJobs' grace: a slot no Job fired is still fired, late, not skipped.
      SCHEDULER_CATCH_UP_SECONDS: '30',
    });
    const ceiling = world.tenant.configuration.ceiling;
    expect((await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'tasks:read', 'tasks:write'] } } as never)).status).toBe(200);
    alice = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
  }, 240_000);

  afterAll(async () => {
    await world?.stop();
    await cluster?.stop();
  });

  it('gives a 5-field cron a CronJob in its zone (Forbid, a starting deadline, the fire container); other schedules stay with the database', async () => {
    const task = await create({ cron: '30 9 * * mon-fri', timezone: 'Europe/Paris' });
    const job = await cronJobOf(task.id);
    expect(job.spec).toMatchObject({ schedule: '30 9 * * mon-fri', timeZone: 'Europe/Paris', concurrencyPolicy: 'Forbid', startingDeadlineSeconds: 60 });
    expect(job.metadata!.labels).toMatchObject({ 'agentplane.io/task': task.id, 'agentplane.io/tenant': world.tenant.tenantId });
    const pod = job.spec!.jobTemplate.spec!.template.spec!;
    expect(pod.securityContext?.runAsNonRoot).toBe(true);
    expect(pod.automountServiceAccountToken).toBe(false);
    const container = pod.containers[0]!;
    expect(container.args).toEqual(['fire']);
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'TASK_ID', value: task.id },
        { name: 'TASK_FIRE_KEY', valueFrom: { secretKeyRef: { name: 'agentplane-runtime', key: 'task-fire-key' } } },
      ]),
    );
    // The key itself is never in the CronJob: only the reference to the Secret.
    expect(JSON.stringify(job)).not.toContain(fireKey);
    await eventually(() => onCronJob(task.id), 'the task to be left to its CronJob');

    const lower = await create({ cron: '0 7 * * *', timezone: 'america/new_york' });
    expect((await cronJobOf(lower.id)).spec!.timeZone).toBe('America/New_York');
    const utc = await create({ cron: '0 6 1 * *' });
    expect((await cronJobOf(utc.id)).spec!.timeZone).toBe('Etc/UTC');
    // Croner's own syntax (`L`, seconds), intervals and one-shot tasks have no CronJob: the database fires them.
    const others = [
      await create({ cron: '0 0 L * *' }),
      await create({ cron: '0 0 9 * * *' }),
      await create({ interval_seconds: 3600 }),
      await create({ run_at: new Date(Date.now() + 86_400_000).toISOString() }),
    ];
    await new Promise((resolve) => setTimeout(resolve, 2_500)); // a reconcile pass, which would make any missing one
    const names = await ours();
    for (const other of others) {
      expect(names).not.toContain(cronJobName(other.id));
      expect(await onCronJob(other.id)).toBe(false);
    }
    for (const done of [task, lower, utc, ...others]) await send(alice, 'POST', `/tasks/${done.id}/cancel`);
  });

  it("fires a slot once when the CronJob controller's Job asks, however often it asks", async () => {
    const task = await create({ cron: '* * * * *' });
    await eventually(() => onCronJob(task.id), 'the task to be left to its CronJob');
    // The controller makes the Job at the next minute; kwok runs its Pod.
    const job = await eventually(
      async () => (await batch.listNamespacedJob({ namespace, labelSelector: `agentplane.io/task=${task.id}` })).items[0],
      "the CronJob controller's Job",
      90_000,
    );
    const jobName = job.metadata!.name!;
    const pod = await eventually(async () => (await core.listNamespacedPod({ namespace, labelSelector: `batch.kubernetes.io/job-name=${jobName}` })).items[0], "the Job's Pod", 30_000);
    // The Pod's environment as the kubelet would give it: the downward API's label, the Secret's key; the Service
    // name resolves only in a cluster, so the runtime's address is this test's.
    const env: Record<string, string> = {};
    for (const variable of pod.spec!.containers[0]!.env!) {
      if (variable.value !== undefined) env[variable.name] = variable.value;
      else if (variable.valueFrom?.fieldRef) env[variable.name] = pod.metadata!.labels![/\['(.+)'\]/.exec(variable.valueFrom.fieldRef.fieldPath)![1]!]!;
      else if (variable.valueFrom?.secretKeyRef) {
        const secret = await core.readNamespacedSecret({ name: variable.valueFrom.secretKeyRef.name!, namespace });
        env[variable.name] = Buffer.from(secret.data![variable.valueFrom.secretKeyRef.key]!, 'base64').toString('utf8');
      }
    }
    expect(env.RUNTIME_URL).toBe(settings.fireUrl);
    env.RUNTIME_URL = world.rt.url;
    const slot = new Date(Number(/-(\d+)$/.exec(jobName)![1]) * 60_000);

    const first = await playFire(env);
    expect(first.code, first.output).toBe(0);
    expect(first.output).toContain(' 202 ');
    const again = await playFire(env);
    expect(again.code, again.output).toBe(0);
    expect(again.output).toContain('already_fired');

    const fired = await fires(task.id);
    expect(fired).toHaveLength(1);
    expect(fired[0]!.slot.toISOString()).toBe(slot.toISOString());
    const after = await eventually(async () => {
      const current = await read(task.id);
      return current.run_count === 1 && current.last_run_id === fired[0]!.run_id ? current : false;
    }, 'the task to count its fire');
    expect(new Date(after.next_run_at!).getTime()).toBeGreaterThan(slot.getTime());
    const run = await world.rt.runtime.database.db.selectFrom('runs').select('id').where('id', '=', fired[0]!.run_id).executeTakeFirst();
    expect(run).toBeDefined();
    await send(alice, 'POST', `/tasks/${task.id}/cancel`);
  }, 150_000);

  it('refuses a fire without the fire key, of a slot not in the schedule, or of an unknown task, and fires nothing', async () => {
    const task = await create({ cron: '0 3 * * *' });
    const slot = new Date(new Date(task.next_run_at!).getTime() - 86_400_000).toISOString();
    expect((await fire(task.id, slot, 'not-the-key-'.repeat(6))).status).toBe(401);
    const noKey = await fetch(`${world.rt.url}/internal/tasks/${task.id}/fires`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ slot }) });
    expect(noKey.status).toBe(401);
    const offSlot = await fire(task.id, new Date(Date.parse(slot) + 60_000).toISOString());
    expect(offSlot.status).toBe(400);
    expect(((await offSlot.json()) as { detail: string }).detail).toMatch(/^slot: .* is not a slot of this task's schedule/);
    const ahead = await fire(task.id, new Date(Date.parse(slot) + 2 * 86_400_000).toISOString());
    expect(ahead.status).toBe(400);
    // A slot before the task's next one was fired or skipped already.
    expect(await (await fire(task.id, slot)).json()).toMatchObject({ fired: false, reason: 'already_fired' });
    expect((await fire(randomUUID(), slot)).status).toBe(404);
    // Through the project's Ingress (a proxy's headers), the route is not there, whatever the key.
    const proxied = await fetch(`${world.rt.url}/internal/tasks/${task.id}/fires`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-fire-key': fireKey, 'x-forwarded-for': '203.0.113.9' },
      body: JSON.stringify({ slot }),
    });
    expect(proxied.status).toBe(404);
    expect(await proxied.json()).toMatchObject({ code: 'no_route' });
    expect((await fire(task.id, 'yesterday')).status).toBe(422);
    expect(await fires(task.id)).toHaveLength(0);
    await send(alice, 'POST', `/tasks/${task.id}/cancel`);
    expect(await (await fire(task.id, new Date(task.next_run_at!).toISOString())).json()).toMatchObject({ fired: false, reason: 'not_scheduled' });
  });

  it('fires a slot itself when no Job did within the grace period', async () => {
    const task = await create({ cron: '0 0 1 1 *' });
    await eventually(() => onCronJob(task.id), 'the task to be left to its CronJob');
    const db = world.rt.runtime.database.db;
    await sql`update tasks set next_run_at = date_trunc('minute', now() - interval '30 seconds') where id = ${task.id}`.execute(db);
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // ten scheduler ticks: still the Job's to fire
    expect(await fires(task.id)).toHaveLength(0);
    await sql`update tasks set next_run_at = date_trunc('minute', now() - interval '2 minutes') where id = ${task.id}`.execute(db);
    await eventually(async () => (await fires(task.id)).length === 1, 'the database scheduler to fire the missed slot');
    expect((await read(task.id)).run_count).toBe(1);
    await send(alice, 'POST', `/tasks/${task.id}/cancel`);
  });

  it("deletes a cancelled task's CronJob, prunes orphans at the next reconcile, and leaves others' CronJobs alone", async () => {
    const task = await create({ cron: '15 * * * *' });
    await eventually(() => cronJob(task.id), 'the CronJob of the task');
    await send(alice, 'POST', `/tasks/${task.id}/cancel`);
    await eventually(async () => (await cronJob(task.id)) === null, "the cancelled task's CronJob to go");

    // One left behind (say, by a replica that died between its task's cancel and the delete), and one not ours.
    const orphan = buildTaskCronJob({ id: randomUUID(), tenantId: world.tenant.tenantId, schedule: '0 * * * *', timeZone: 'Etc/UTC' }, settings);
    await batch.createNamespacedCronJob({ namespace, body: orphan });
    const foreign: k8s.V1CronJob = {
      metadata: { name: 'nightly-backup', namespace },
      spec: { schedule: '0 2 * * *', jobTemplate: { spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'backup', image: 'busybox' }] } } } } },
    };
    await batch.createNamespacedCronJob({ namespace, body: foreign });
    await eventually(async () => !(await ours()).includes(orphan.metadata!.name!), 'the orphan to be pruned', 15_000);
    expect((await batch.readNamespacedCronJob({ name: 'nightly-backup', namespace })).metadata!.name).toBe('nightly-backup');
  });

  it("deletes a tenant's CronJobs when the tenant is erased, before its rows", async () => {
    const tasks = [await create({ cron: '0 8 * * *' }), await create({ cron: '0 20 * * *' })];
    for (const task of tasks) await eventually(() => cronJob(task.id), 'the CronJob of the task');
    const erased = await world.rt.admin(`/tenants/${world.tenant.tenantId}`, { method: 'DELETE' });
    expect(erased.status, await erased.clone().text()).toBeLessThan(300);
    for (const task of tasks) expect(await cronJob(task.id)).toBeNull();
    const left = await batch.listNamespacedCronJob({ namespace, labelSelector: `agentplane.io/tenant=${world.tenant.tenantId}` });
    expect(left.items).toHaveLength(0);
  });
});
