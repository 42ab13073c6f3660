// Tenants and deletion on a real API server, PostgreSQL and runtime: registration and settings sync; a Tenant's
// erase through the runtime, recorded before the finalizer goes; an erase that cannot run yet keeps the finalizer;
// a Project's erase (Tenants first, then database and role, then namespace), also mid-provisioning; and an
// operator restarted between any two of its writes still converging.
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project, Tenant } from '@agentplane/lib/kubernetes/resources';
import type { Operator } from '@agentplane/operator/app';
import { eventually } from '../harness/eventually.js';
import { conditionOf, operatorSuiteBinaries, startOperator, startOperatorEnvironment, waitForCondition, type OperatorEnvironment } from './fixture.js';

const binaries = operatorSuiteBinaries();

describe.skipIf(!binaries)('Tenant reconciliation and erase', () => {
  let env: OperatorEnvironment;
  let operator: Operator;
  const namespaceOf = (project: string) => `agentplane-${project}`;
  const acme = namespaceOf('acme');

  beforeAll(async () => {
    env = await startOperatorEnvironment(binaries!);
    operator = await startOperator(env.cluster, env.config(), { runtimeClient: env.runtimeClient });
    await createProject('acme');
    await waitForCondition(() => env.admin.project('acme'), 'Ready', 'True', { timeoutMs: 90_000 });
  }, 15 * 60_000);

  afterAll(async () => {
    await operator?.stop();
    await env?.stop();
  });

  async function createProject(name: string): Promise<Project> {
    await env.admin.seedRuntimeSecret(namespaceOf(name), env.runtime.adminKey);
    return env.admin.createProject(name);
  }

  const readTenant = (namespace: string, name: string) => () => env.admin.tenant(namespace, name);

  async function readyTenant(project: string, settings: Record<string, unknown> = {}): Promise<Tenant> {
    const tenant = await env.admin.createTenant(project, namespaceOf(project), settings);
    return (await waitForCondition(readTenant(namespaceOf(project), tenant.metadata.name), 'Ready', 'True')) as Tenant;
  }

  async function gone(read: () => Promise<unknown>, what: string, timeoutMs = 60_000): Promise<void> {
    await eventually(async () => (await read()) === null, { what, timeoutMs });
  }

  /** Every version of one Tenant the API server reports, from now on, until stopped. */
  async function recordVersions(namespace: string, name: string) {
    const events: Array<{ type: string; object: Tenant; at: number }> = [];
    const watch = new k8s.Watch(env.cluster.kubeConfig());
    const request = await watch.watch(
      `/apis/agentplane.io/v1alpha1/namespaces/${namespace}/tenants`,
      { fieldSelector: `metadata.name=${name}` },
      (type, object: Tenant) => events.push({ type, object, at: Date.now() }),
      () => {},
    );
    return { events, stop: () => request.abort() };
  }

  const runtimeTenant = (tenantId: string) => env.runtime.admin(`/tenants/${tenantId}`);

  it('registers a Tenant with its runtime and keeps its settings in sync', async () => {
    const tenant = await readyTenant('acme', { default_model: 'model-a' });
    expect(tenant.metadata.finalizers).toEqual(['agentplane.io/tenant-erase']);
    expect(tenant.status?.registeredAt).toBeDefined();
    expect(tenant.status?.observedGeneration).toBe(tenant.metadata.generation);
    const registered = (await (await runtimeTenant(tenant.spec.tenantId)).json()) as { name: string; settings_json: Record<string, unknown> };
    expect(registered).toMatchObject({ name: 'tenant of acme', settings_json: { default_model: 'model-a' } });

    await env.admin.patchTenantSpec(acme, tenant.metadata.name, { settings: { default_model: 'model-b', temperature_cap: 0.5 } });
    await eventually(
      async () => {
        const current = (await env.admin.tenant(acme, tenant.metadata.name))!;
        expect(conditionOf(current, 'SettingsSynced')).toMatchObject({ status: 'True', observedGeneration: current.metadata.generation });
        expect(current.metadata.generation).toBeGreaterThan(tenant.metadata.generation!);
        return true;
      },
      { what: 'the new settings synced' },
    );
    const synced = (await (await runtimeTenant(tenant.spec.tenantId)).json()) as { settings_json: Record<string, unknown> };
    expect(synced.settings_json).toMatchObject({ default_model: 'model-b', temperature_cap: 0.5 });
  });

  it('does not register a Tenant whose Project does not exist, and says so', async () => {
    const tenant = await env.admin.createTenant('later', acme);
    await waitForCondition(readTenant(acme, tenant.metadata.name), 'Registered', 'False', { reason: 'ProjectNotFound' });
    await env.admin.kube.deleteCustom('Tenant', tenant.metadata.name, acme);
    await gone(readTenant(acme, tenant.metadata.name), 'the unregistered tenant gone');
  });

  it('erases a deleted Tenant through the runtime, records the report, and only then removes the finalizer', async () => {
    const tenant = await readyTenant('acme');
    const id = tenant.spec.tenantId;
    const versions = await recordVersions(acme, tenant.metadata.name);
    const callsBefore = env.calls.length;
    try {
      await env.admin.kube.deleteCustom('Tenant', tenant.metadata.name, acme);
      await eventually(() => versions.events.some((e) => e.type === 'DELETED'), { what: 'the Tenant deleted' });
    } finally {
      versions.stop();
    }
    const erase = env.calls.slice(callsBefore).filter((call) => call.method === 'DELETE' && call.url.endsWith(`/tenants/${id}`));
    expect(erase.map((call) => call.status)).toEqual([200]);

    // Every version that lost the finalizer already carried the report; the report came before the object went.
    const deleted = versions.events.find((e) => e.type === 'DELETED')!;
    for (const { object } of versions.events) {
      if (!object.metadata.finalizers?.includes('agentplane.io/tenant-erase')) expect(object.status?.erase?.complete).toBe(true);
    }
    expect(erase[0]!.at).toBeLessThanOrEqual(deleted.at);
    const report = deleted.object.status!.erase!;
    expect(conditionOf(deleted.object, 'Erased')).toMatchObject({ status: 'True', reason: 'Erased' });
    expect(report.rowsDeleted?.tenants).toBe(1);
    // The runtime's ordered erase: stop work, sandboxes, rows, then what lives outside the database.
    const order = ['stop_work', 'sandboxes', 'rows', 'outside_database'];
    const phases = report.steps.map((step) => order.indexOf(step.phase));
    expect(phases).toEqual([...phases].sort((a, b) => a - b));
    expect(report.steps.some((step) => step.phase === 'rows' && step.outcome === 'done')).toBe(true);
    expect((await runtimeTenant(id)).status).toBe(404);
  });

  it('keeps the finalizer while the runtime cannot be reached, says why, and finishes the erase once it can', async () => {
    const tenant = await readyTenant('acme');
    env.link.cut();
    try {
      await env.admin.kube.deleteCustom('Tenant', tenant.metadata.name, acme);
      const waiting = await waitForCondition(readTenant(acme, tenant.metadata.name), 'Erased', 'False', { reason: 'RuntimeUnreachable' });
      expect(waiting.metadata.finalizers).toEqual(['agentplane.io/tenant-erase']);
      expect(conditionOf(waiting, 'Erased')?.message).toMatch(/could not be reached/);
      // Retried with backoff, still there.
      await eventually(() => env.calls.filter((c) => c.method === 'DELETE' && c.url.endsWith(tenant.spec.tenantId) && c.error).length >= 2, { what: 'retries' });
      expect(await env.admin.tenant(acme, tenant.metadata.name)).not.toBeNull();
    } finally {
      env.link.restore();
    }
    await gone(readTenant(acme, tenant.metadata.name), 'the tenant erased once the runtime answers');
    expect((await runtimeTenant(tenant.spec.tenantId)).status).toBe(404);
  });

  it('keeps the finalizer of a Tenant whose registration was sent but not answered, until the runtime says what it has', async () => {
    // The runtime stays /ready (so its Project stays Ready and the registration is sent), but registrations and
    // erases are lost on the way: sent, never answered.
    await waitForCondition(() => env.admin.project('acme'), 'Ready', 'True');
    env.link.dropRequests(['POST', 'DELETE']);
    const callsBefore = env.calls.length;
    let tenant!: Tenant;
    try {
      tenant = await env.admin.createTenant('acme', acme);
      const attempted = await eventually(
        async () => {
          const current = await env.admin.tenant(acme, tenant.metadata.name);
          const lost = env.calls.slice(callsBefore).some((call) => call.method === 'POST' && call.url.endsWith('/tenants') && call.error);
          return current?.status?.registrationAttemptedAt !== undefined && lost && current;
        },
        { what: 'the registration sent and lost' },
      );
      expect(attempted.status?.registeredAt).toBeUndefined();

      await env.admin.kube.deleteCustom('Tenant', tenant.metadata.name, acme);
      // The request might have reached the runtime: the erase must ask it, so the finalizer stays until it can.
      const waiting = await waitForCondition(readTenant(acme, tenant.metadata.name), 'Erased', 'False', { reason: 'RuntimeUnreachable' });
      expect(waiting.metadata.finalizers).toEqual(['agentplane.io/tenant-erase']);
    } finally {
      env.link.restore();
    }
    await gone(readTenant(acme, tenant.metadata.name), 'the tenant finalized once the runtime answers');
    const erase = env.calls.filter((call) => call.method === 'DELETE' && call.url.endsWith(`/tenants/${tenant.spec.tenantId}`));
    expect(erase.at(-1)?.status).toBe(404);
  });

  it("erases a Project's Tenants first, then drops its database and role, then deletes its namespace", async () => {
    await createProject('doomed');
    await waitForCondition(() => env.admin.project('doomed'), 'Ready', 'True', { timeoutMs: 90_000 });
    const tenants = [await readyTenant('doomed'), await readyTenant('doomed')];
    expect(await operator.databases!.exists('agentplane_doomed')).toEqual({ database: true, role: true });
    const callsBefore = env.calls.length;

    await env.admin.kube.deleteCustom('Project', 'doomed');
    await gone(() => env.admin.project('doomed'), 'the Project gone', 90_000);

    expect(await env.admin.namespaceExists(namespaceOf('doomed'))).toBe(false);
    expect(await operator.databases!.exists('agentplane_doomed')).toEqual({ database: false, role: false });
    const erased = env.calls.slice(callsBefore).filter((call) => call.method === 'DELETE' && call.status === 200);
    expect(erased.map((call) => call.url.split('/').pop()).sort()).toEqual(tenants.map((t) => t.spec.tenantId).sort());
    for (const tenant of tenants) expect((await runtimeTenant(tenant.spec.tenantId)).status).toBe(404);
  });

  it('says which Tenants a deleted Project waits on, and why', async () => {
    await createProject('patient');
    await waitForCondition(() => env.admin.project('patient'), 'Ready', 'True', { timeoutMs: 90_000 });
    const tenant = await readyTenant('patient');
    env.link.cut();
    try {
      await env.admin.kube.deleteCustom('Project', 'patient');
      const waiting = (await waitForCondition(() => env.admin.project('patient'), 'Ready', 'False', { reason: 'ErasingTenants' })) as Project;
      await eventually(
        async () => {
          const message = conditionOf(await env.admin.project('patient'), 'Ready')?.message ?? '';
          expect(message).toContain(`1 tenant of namespace ${namespaceOf('patient')} still being erased`);
          expect(message).toContain(`tenant ${tenant.metadata.name}: `);
          expect(message).toMatch(/could not be reached/);
          return true;
        },
        { what: 'the reason naming the tenant' },
      );
      expect(waiting.metadata.finalizers).toEqual(['agentplane.io/project-erase']);
      expect(await env.admin.namespaceExists(namespaceOf('patient'))).toBe(true);
      expect(await operator.databases!.exists('agentplane_patient')).toEqual({ database: true, role: true });
    } finally {
      env.link.restore();
    }
    await gone(() => env.admin.project('patient'), 'the Project gone once its tenant is erased', 90_000);
    expect(await operator.databases!.exists('agentplane_patient')).toEqual({ database: false, role: false });
  });

  it('finalizes a Tenant that never reached its runtime without calling it', async () => {
    env.link.cut();
    try {
      await createProject('unreached');
      await waitForCondition(() => env.admin.project('unreached'), 'Ready', 'False', { reason: 'RuntimeNotReady', timeoutMs: 90_000 });
      const tenant = await env.admin.createTenant('unreached', namespaceOf('unreached'));
      await waitForCondition(readTenant(namespaceOf('unreached'), tenant.metadata.name), 'Registered', 'False', { reason: 'ProjectNotReady' });
      const versions = await recordVersions(namespaceOf('unreached'), tenant.metadata.name);
      try {
        await env.admin.kube.deleteCustom('Tenant', tenant.metadata.name, namespaceOf('unreached'));
        await eventually(() => versions.events.some((e) => e.type === 'DELETED'), { what: 'the Tenant deleted' });
      } finally {
        versions.stop();
      }
      const deleted = versions.events.find((e) => e.type === 'DELETED')!.object;
      expect(conditionOf(deleted, 'Erased')).toMatchObject({ status: 'True', reason: 'NeverRegistered' });
      expect(deleted.status?.registrationAttemptedAt).toBeUndefined();
      expect(env.calls.filter((call) => call.url.endsWith(`/tenants/${tenant.spec.tenantId}`))).toEqual([]);
      await env.admin.kube.deleteCustom('Project', 'unreached');
      await gone(() => env.admin.project('unreached'), 'the unreached Project gone', 90_000);
    } finally {
      env.link.restore();
    }
  });

  it('converges when a Project is deleted while it is still being provisioned, leaving nothing behind', async () => {
    await createProject('hasty');
    const tenant = await env.admin.createTenant('hasty', namespaceOf('hasty'));
    await eventually(async () => Boolean((await env.admin.project('hasty'))?.metadata.finalizers?.length), { what: 'the finalizer added' });
    await env.admin.kube.deleteCustom('Project', 'hasty');
    await gone(() => env.admin.project('hasty'), 'the Project gone', 90_000);
    expect(await env.admin.tenant(namespaceOf('hasty'), tenant.metadata.name)).toBeNull();
    expect(await env.admin.namespaceExists(namespaceOf('hasty'))).toBe(false);
    expect(await operator.databases!.exists('agentplane_hasty')).toEqual({ database: false, role: false });
    expect((await runtimeTenant(tenant.spec.tenantId)).status).toBe(404);
  });

  it('converges when the operator is restarted between any two of its writes, provisioning and erasing', async () => {
    await operator.stop();
    /** One operator after another, each stopped right after its first write (a second write never happens). */
    async function untilSettled(settled: () => Promise<boolean>, what: string): Promise<number> {
      for (let restarts = 0; restarts < 80; restarts += 1) {
        let written = 0;
        let stopped = false;
        const crashing = await startOperator(env.cluster, env.config({ LEADER_ELECTION: 'false' }), {
          runtimeClient: env.runtimeClient,
          wrapKube: (kube) =>
            kube.withOptions({
              mayWrite: () => {
                if (written >= 1) throw new Error('the operator crashed');
                written += 1;
              },
            }),
        });
        try {
          await eventually(async () => written >= 1 || (await settled()), { what: `${what}: a write or the end`, timeoutMs: 60_000 });
          if (written === 0) return restarts;
        } finally {
          if (!stopped) await crashing.stop();
          stopped = true;
        }
      }
      throw new Error(`${what}: not settled after 80 restarts`);
    }

    await createProject('phoenix');
    const tenant = await env.admin.createTenant('phoenix', namespaceOf('phoenix'), { default_model: 'model-p' });
    const restartsUp = await untilSettled(async () => {
      const project = await env.admin.project('phoenix');
      const current = await env.admin.tenant(namespaceOf('phoenix'), tenant.metadata.name);
      return conditionOf(project, 'Ready')?.status === 'True' && conditionOf(current, 'Ready')?.status === 'True';
    }, 'provisioning');
    expect(restartsUp).toBeGreaterThan(10);
    expect((await runtimeTenant(tenant.spec.tenantId)).status).toBe(200);

    await env.admin.kube.deleteCustom('Project', 'phoenix');
    const restartsDown = await untilSettled(async () => (await env.admin.project('phoenix')) === null, 'erasing');
    expect(restartsDown).toBeGreaterThan(3);
    expect(await env.admin.namespaceExists(namespaceOf('phoenix'))).toBe(false);
    expect((await runtimeTenant(tenant.spec.tenantId)).status).toBe(404);
    operator = await startOperator(env.cluster, env.config(), { runtimeClient: env.runtimeClient });
    expect(await operator.databases!.exists('agentplane_phoenix')).toEqual({ database: false, role: false });
  });
});
