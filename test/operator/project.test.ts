// A Project on a real API server (kwok runs its Pods), a real PostgreSQL and a real runtime process: every object
// the operator makes, with owner references and labels; Ready; replicas the stores cannot share refused; a spec
// change rolling through; zero writes at steady state; 409 conflicts retried; two operators of which only the
// leader writes.
import * as k8s from '@kubernetes/client-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABELS, MANAGED_BY, SPEC_HASH_ANNOTATION, type Project } from '@agentplane/lib/kubernetes/resources';
import type { Operator } from '@agentplane/operator/app';
import type { KubeClient } from '@agentplane/operator/kube/client';
import { eventually } from '../harness/eventually.js';
import { conditionOf, operatorSuiteBinaries, startOperator, startOperatorEnvironment, waitForCondition, type OperatorEnvironment } from './fixture.js';

const binaries = operatorSuiteBinaries();

describe.skipIf(!binaries)('Project reconciliation', () => {
  let env: OperatorEnvironment;
  let operator: Operator;
  const namespaceOf = (project: string) => `agentplane-${project}`;
  /**
   * Stores a production install shares between runtime replicas. The operator only hands them to the runtime's Pods
   * (which kwok runs without running anything), so nothing here connects to them.
   */
  const sharedStores = {
    RUNTIME_REDIS_URL: 'redis://redis.agentplane-system.svc:6379',
    RUNTIME_S3_BUCKET: 'agentplane-blobs',
    RUNTIME_S3_ENDPOINT: 'http://minio.agentplane-system.svc:9000',
    RUNTIME_S3_ACCESS_KEY_ID: 'access-key',
    RUNTIME_S3_SECRET_ACCESS_KEY: 'secret-key',
  };

  beforeAll(async () => {
    env = await startOperatorEnvironment(binaries!);
    operator = await startOperator(env.cluster, env.config(), { runtimeClient: env.runtimeClient });
  }, 15 * 60_000);

  afterAll(async () => {
    await operator?.stop();
    await env?.stop();
  });

  /** A Project whose runtime Secret carries the test runtime's admin key (the operator keeps existing keys). */
  async function createProject(name: string, spec: Project['spec'] = {}): Promise<Project> {
    await env.admin.seedRuntimeSecret(namespaceOf(name), env.runtime.adminKey);
    return env.admin.createProject(name, spec);
  }

  const readProject = (name: string) => () => env.admin.project(name);

  it('makes every object of the project, owned by the Project and labelled, and reaches Ready', async () => {
    const created = await createProject('alpha', {
      displayName: 'Alpha',
      quota: { requests: { cpu: '4', memory: '8Gi' }, pods: 20 },
      containerDefaults: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } },
    });
    const ready = (await waitForCondition(readProject('alpha'), 'Ready', 'True', { timeoutMs: 90_000 })) as Project;
    const namespace = namespaceOf('alpha');
    expect(ready.status).toMatchObject({
      observedGeneration: ready.metadata.generation,
      namespace,
      dataPlaneUrl: 'https://alpha.agents.example.test',
      runtimeUrl: env.link.url,
    });
    for (const type of ['NamespaceReady', 'DatabaseReady', 'RuntimeAvailable']) expect(conditionOf(ready, type)?.status).toBe('True');
    expect(ready.metadata.finalizers).toContain('agentplane.io/project-erase');

    const owner = { apiVersion: 'agentplane.io/v1alpha1', kind: 'Project', name: 'alpha', uid: created.metadata.uid, controller: true, blockOwnerDeletion: true };
    const labels = { [LABELS.managedBy]: MANAGED_BY, [LABELS.partOf]: 'agentplane', [LABELS.project]: 'alpha' };
    const expected: Array<[string, string, string]> = [
      ['v1', 'ServiceAccount', 'agent-runtime'],
      ['rbac.authorization.k8s.io/v1', 'RoleBinding', 'agent-runtime'],
      ['networking.k8s.io/v1', 'NetworkPolicy', 'default-deny'],
      ['networking.k8s.io/v1', 'NetworkPolicy', 'allow-runtime-ingress'],
      ['networking.k8s.io/v1', 'NetworkPolicy', 'allow-egress-dns'],
      ['networking.k8s.io/v1', 'NetworkPolicy', 'allow-egress-internet'],
      ['networking.k8s.io/v1', 'NetworkPolicy', 'allow-runtime-stores'],
      ['v1', 'ResourceQuota', 'project-quota'],
      ['v1', 'LimitRange', 'container-defaults'],
      ['v1', 'Secret', 'agentplane-runtime'],
      ['apps/v1', 'Deployment', 'agent-runtime'],
      ['v1', 'Service', 'agent-runtime'],
      ['networking.k8s.io/v1', 'Ingress', 'data-plane'],
      ['policy/v1', 'PodDisruptionBudget', 'agent-runtime'],
    ];
    for (const [apiVersion, kind, name] of expected) {
      const object = await env.admin.kube.get({ apiVersion, kind, name, namespace });
      expect(object, `${kind} ${name}`).not.toBeNull();
      expect(object!.metadata?.ownerReferences, `${kind} ${name}`).toEqual([owner]);
      expect(object!.metadata?.labels, `${kind} ${name}`).toMatchObject(labels);
      expect(object!.metadata?.annotations?.[SPEC_HASH_ANNOTATION], `${kind} ${name}`).toMatch(/^[0-9a-f]{16}$/);
    }
    const ns = await env.admin.kube.get<k8s.V1Namespace>({ apiVersion: 'v1', kind: 'Namespace', name: namespace });
    expect(ns!.metadata?.ownerReferences).toEqual([owner]);
    expect(ns!.metadata?.labels).toMatchObject({ ...labels, 'pod-security.kubernetes.io/enforce': 'restricted' });

    const binding = await env.admin.kube.get<k8s.V1RoleBinding>({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', name: 'agent-runtime', namespace });
    expect(binding!.roleRef).toMatchObject({ kind: 'ClusterRole', name: 'agentplane-project-runtime' });

    // The runtime Pods run (kwok) under Pod Security `restricted`.
    const pods = await env.admin.core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=runtime' });
    expect(pods.items.filter((pod) => pod.status?.phase === 'Running')).toHaveLength(1);

    // Its own database and role, whose password is the one in the Secret; other roles may not connect.
    const secret = await env.admin.core.readNamespacedSecret({ name: 'agentplane-runtime', namespace });
    const value = (key: string) => Buffer.from(secret.data![key]!, 'base64').toString('utf8');
    expect(value('admin-key')).toBe(env.runtime.adminKey);
    const client = new pg.Client({ connectionString: value('database-url') });
    await client.connect();
    try {
      const { rows } = await client.query<{ user: string; database: string; vector: boolean }>(
        "select current_user as user, current_database() as database, exists (select 1 from pg_extension where extname = 'vector') as vector",
      );
      expect(rows[0]).toEqual({ user: 'agentplane_alpha', database: 'agentplane_alpha', vector: true });
    } finally {
      await client.end();
    }
    const adminClient = new pg.Client({ connectionString: env.postgres.adminUrl });
    await adminClient.connect();
    try {
      const { rows } = await adminClient.query("select has_database_privilege('public', 'agentplane_alpha', 'CONNECT') as public_connect");
      expect(rows[0].public_connect).toBe(false);
    } finally {
      await adminClient.end();
    }
  });

  it('refuses more replicas than the configured stores can share, then rolls the change through once they are configured', async () => {
    const namespace = namespaceOf('alpha');
    const before = (await env.admin.project('alpha'))!;
    await env.admin.patchProjectSpec('alpha', { runtime: { replicas: 2 }, quota: { pods: 30 }, containerDefaults: null });
    const refused = await waitForCondition(readProject('alpha'), 'SpecAccepted', 'False', { reason: 'SharedStoresRequired' });
    expect(conditionOf(refused, 'SpecAccepted')?.message).toBe(
      'spec.runtime.replicas is 2, but replicas share nothing without Redis (RUNTIME_REDIS_URL), an S3 store (RUNTIME_S3_BUCKET) configured on the operator; set replicas to 1 or configure the stores',
    );
    expect(refused.status?.observedGeneration).toBe(before.metadata.generation);
    // The runtime of the last accepted spec keeps serving, untouched, and stays Ready: its tenants and their
    // configuration keep flowing.
    expect(conditionOf(refused, 'Ready')?.status).toBe('True');
    expect((await env.admin.apps.readNamespacedDeployment({ name: 'agent-runtime', namespace })).spec?.replicas).toBe(1);

    // The platform engineer configures the shared stores; the operator, restarted with them, rolls the change out.
    await operator.stop();
    operator = await startOperator(env.cluster, env.config(sharedStores), { runtimeClient: env.runtimeClient });
    await eventually(
      async () => {
        const project = (await env.admin.project('alpha'))!;
        expect(project.metadata.generation).toBeGreaterThan(before.metadata.generation!);
        expect(project.status?.observedGeneration).toBe(project.metadata.generation);
        expect(conditionOf(project, 'RuntimeAvailable')).toMatchObject({ status: 'True', message: '2 of 2 runtime replicas are available' });
        expect(conditionOf(project, 'Ready')?.status).toBe('True');
        expect(conditionOf(project, 'SpecAccepted')?.status).toBe('True');
        return true;
      },
      { what: 'the change rolled through', timeoutMs: 90_000 },
    );
    const deployment = await env.admin.apps.readNamespacedDeployment({ name: 'agent-runtime', namespace });
    expect(deployment.spec?.replicas).toBe(2);
    const quota = await env.admin.core.readNamespacedResourceQuota({ name: 'project-quota', namespace });
    expect(quota.spec?.hard?.pods).toBe('30');
    expect(await env.admin.kube.get({ apiVersion: 'v1', kind: 'LimitRange', name: 'container-defaults', namespace })).toBeNull();
  });

  it('makes no writes at steady state, and reads only the reconciled objects themselves from the API server', async () => {
    const tenant = await env.admin.createTenant('alpha', namespaceOf('alpha'), { default_model: 'model-a' });
    await waitForCondition(() => env.admin.tenant(namespaceOf('alpha'), tenant.metadata.name), 'Ready', 'True');
    // The main operator settled first (nothing queued, no write for a second): the world has stopped changing, so
    // whatever the steady operator's first passes find can only confirm what it did. Under load the earlier
    // rollout's last status changes could otherwise land just as the steady operator starts, and be its to write.
    let lastWrites = -1;
    await eventually(
      async () => {
        const writes = await operator.metrics.writesTotal();
        const settled = writes === lastWrites && operator.queue.depth === 0;
        lastWrites = writes;
        return settled;
      },
      { what: 'the main operator settled', intervalMs: 1_000, timeoutMs: 60_000 },
    );
    const steady = await startOperator(env.cluster, env.config({ ...sharedStores, RESYNC_SECONDS: '1', LEADER_ELECTION_LEASE: 'steady-state' }), { runtimeClient: env.runtimeClient });
    try {
      // Its first passes over everything it finds may only confirm what the main operator did.
      await eventually(async () => (await steady.metrics.reconcilesTotal('Project')) >= 1, { what: 'a first reconcile' });
      const writesBefore = await steady.metrics.writesTotal();
      const reconcilesBefore = await steady.metrics.reconcilesTotal();
      const readsBefore = await steady.metrics.readsTotal();
      const customReadsBefore = (await steady.metrics.readsTotal('Project')) + (await steady.metrics.readsTotal('Tenant'));
      // Every resync reconciles the Project and its Tenant again.
      await eventually(async () => (await steady.metrics.reconcilesTotal()) >= reconcilesBefore + 8, { what: 'several resyncs', timeoutMs: 30_000 });
      expect(await steady.metrics.writesTotal()).toBe(writesBefore);
      expect(writesBefore).toBe(0);
      // The namespace, the Secret, the Deployment and the other owned objects come from the watch caches: a steady
      // pass reads its Project (and a Tenant pass its Tenant and Project) fresh, and nothing else.
      const reconciles = (await steady.metrics.reconcilesTotal()) - reconcilesBefore;
      const reads = (await steady.metrics.readsTotal()) - readsBefore;
      const customReads = (await steady.metrics.readsTotal('Project')) + (await steady.metrics.readsTotal('Tenant')) - customReadsBefore;
      expect(reads).toBe(customReads);
      expect(reads).toBeLessThanOrEqual(2 * reconciles + 2);
    } finally {
      await steady.stop();
    }
  });

  it('puts back an object someone deletes at once, without waiting for a resync', async () => {
    // An operator that resyncs once an hour, settled: only the deletion's watch event can bring the Project back.
    await operator.stop();
    operator = await startOperator(env.cluster, env.config({ ...sharedStores, RESYNC_SECONDS: '3600' }), { runtimeClient: env.runtimeClient });
    await eventually(async () => (await operator.metrics.reconcilesTotal('Project')) >= 1 && operator.queue.depth === 0, { what: 'a settled operator' });
    const namespace = namespaceOf('alpha');
    const policies = await env.admin.kube.list('networking.k8s.io/v1', 'NetworkPolicy', namespace, `${LABELS.project}=alpha`);
    expect(policies.length).toBeGreaterThan(0);
    const victim = policies[0]!;
    await env.admin.kube.delete({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', name: victim.metadata!.name!, namespace });
    const restored = await eventually(
      async () => {
        const found = await env.admin.kube.get({ apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', name: victim.metadata!.name!, namespace });
        return found && found.metadata?.uid !== victim.metadata?.uid ? found : false;
      },
      { what: 'the NetworkPolicy back', timeoutMs: 30_000 },
    );
    expect(restored.metadata?.labels?.[LABELS.project]).toBe('alpha');
    expect(restored.metadata?.annotations?.[SPEC_HASH_ANNOTATION]).toBe(victim.metadata?.annotations?.[SPEC_HASH_ANNOTATION]);
  });

  it("refuses a namespace the Project cannot have, and leaves it standing when the Project goes", async () => {
    // With the prefix `agentplane-`, a Project named `system` would get the operator's own namespace.
    await env.admin.createProject('system');
    const refused = await waitForCondition(readProject('system'), 'Ready', 'False', { reason: 'NamespaceConflict' });
    expect(conditionOf(refused, 'NamespaceReady')).toMatchObject({
      status: 'False',
      reason: 'NamespaceConflict',
      message: "namespace agentplane-system is the operator's own, so project system cannot have it; rename the project or set another PROJECT_NAMESPACE_PREFIX",
    });
    const operatorNamespace = await env.admin.core.readNamespace({ name: 'agentplane-system' });
    expect(operatorNamespace.metadata?.ownerReferences).toBeUndefined();
    expect(operatorNamespace.metadata?.labels?.[LABELS.project]).toBeUndefined();
    expect(await env.admin.kube.list('v1', 'Secret', 'agentplane-system', `${LABELS.project}=system`)).toEqual([]);

    await env.admin.kube.deleteCustom('Project', 'system');
    await eventually(async () => (await env.admin.project('system')) === null, { what: 'the refused Project gone', timeoutMs: 60_000 });
    expect((await env.admin.core.readNamespace({ name: 'agentplane-system' })).metadata?.deletionTimestamp).toBeUndefined();
  });

  it('retries writes the API server refuses with 409 because someone else changed the object', async () => {
    await operator.stop();
    const admin = env.admin;
    let interferences = 0;
    /** Before each of the first few status and finalizer writes, another client changes the object. */
    const interfering = (kube: KubeClient): KubeClient => {
      const touch = async (object: { metadata: { name: string; namespace?: string } }) => {
        if (interferences >= 6) return;
        interferences += 1;
        const body = { metadata: { annotations: { 'test.agentplane.io/touched': String(interferences) } } };
        const asMerge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
        await admin.kube.custom.patchClusterCustomObject({ group: 'agentplane.io', version: 'v1alpha1', plural: 'projects', name: object.metadata.name, body }, asMerge);
      };
      const replaceStatus = kube.replaceStatus.bind(kube);
      const patchMetadata = kube.patchCustomMetadata.bind(kube);
      kube.replaceStatus = (async (kind: 'Project', object: Project) => {
        if (kind === 'Project') await touch(object);
        return replaceStatus(kind, object);
      }) as KubeClient['replaceStatus'];
      kube.patchCustomMetadata = (async (kind: 'Project', object: Project, metadata: Record<string, unknown>) => {
        if (kind === 'Project') await touch(object);
        return patchMetadata(kind, object, metadata);
      }) as KubeClient['patchCustomMetadata'];
      return kube;
    };
    operator = await startOperator(env.cluster, env.config(sharedStores), { runtimeClient: env.runtimeClient, wrapKube: interfering });
    await createProject('contested');
    const ready = (await waitForCondition(readProject('contested'), 'Ready', 'True', { timeoutMs: 90_000 })) as Project;
    expect(ready.metadata.finalizers).toEqual(['agentplane.io/project-erase']);
    expect(ready.metadata.annotations?.['test.agentplane.io/touched']).toBe('6');
    const conflicts = (await operator.metrics.conflicts.get()).values.reduce((sum, v) => sum + v.value, 0);
    expect(conflicts).toBeGreaterThanOrEqual(6);
  });

  it('lets only the leader of two operators write, and the other take over when it stops', async () => {
    await operator.stop();
    const first = await startOperator(env.cluster, env.config(sharedStores), { runtimeClient: env.runtimeClient });
    const second = await startOperator(env.cluster, env.config(sharedStores), { runtimeClient: env.runtimeClient });
    try {
      const leader = await eventually(() => (first.isLeader() ? first : second.isLeader() ? second : false), { what: 'a leader' });
      const standby = leader === first ? second : first;
      await createProject('delta');
      await waitForCondition(readProject('delta'), 'Ready', 'True', { timeoutMs: 90_000 });
      expect(await leader.metrics.writesTotal()).toBeGreaterThan(0);
      expect(await standby.metrics.writesTotal()).toBe(0);
      expect(await standby.metrics.reconcilesTotal()).toBe(0);
      // Both are ready (their watches run); only one leads.
      for (const replica of [leader, standby]) expect((await fetch(`${replica.url()}/ready`)).status).toBe(200);

      await leader.stop();
      await eventually(() => standby.isLeader(), { what: 'the standby leading', timeoutMs: 15_000 });
      await env.admin.patchProjectSpec('delta', { runtime: { replicas: 2 } });
      await eventually(
        async () => {
          const project = (await env.admin.project('delta'))!;
          expect(project.status?.observedGeneration).toBe(project.metadata.generation);
          expect(conditionOf(project, 'RuntimeAvailable')?.message).toBe('2 of 2 runtime replicas are available');
          return true;
        },
        { what: 'the new leader rolling the change through', timeoutMs: 90_000 },
      );
      expect(await standby.metrics.writesTotal()).toBeGreaterThan(0);
      const metrics = await (await fetch(`${standby.url()}/metrics`)).text();
      expect(metrics).toMatch(/agentplane_operator_writes_total\{verb="apply",kind="Deployment"\} \d+/);
      expect(metrics).toMatch(/agentplane_operator_leader 1/);
    } finally {
      await Promise.all([first.stop(), second.stop()]);
    }
  });
});
