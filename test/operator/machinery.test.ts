// The operator's machinery on a real API server: leader election on a Lease (one leader at a time, takeover when
// the leader stops, stepping down when another holder appears), the one status writer (no write when nothing
// changed, lastTransitionTime only on a flip, 409s retried) and the finalizer helper.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, LABELS, MANAGED_BY, type Project } from '@agentplane/lib/kubernetes/resources';
import { silentLogger } from '@agentplane/lib/logging';
import { ensureFinalizer, finalize } from '@agentplane/operator/finalizers';
import { KubeClient } from '@agentplane/operator/kube/client';
import { OwnedObjectCache } from '@agentplane/operator/kube/owned';
import { LeaderElector } from '@agentplane/operator/leader';
import { setCondition, writeStatus } from '@agentplane/operator/status';
import { eventually } from '../harness/eventually.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { freePort, typeScriptNodeArgs } from '../harness/process.js';
import { installCrds, OPERATOR_NAMESPACE, prepareCluster, startTcpLink } from './fixture.js';

const binaries = kubernetesBinaries();
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

describe.skipIf(!binaries)('operator machinery on a real API server', () => {
  let cluster: KubernetesCluster;
  let kube: KubeClient;

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!, { controllerManager: false, kwok: false });
    await installCrds(cluster.kubeConfig());
    await prepareCluster(cluster.kubeConfig());
    kube = new KubeClient(cluster.kubeConfig());
  }, 15 * 60_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  async function createProject(name: string): Promise<Project> {
    const body: Project = { apiVersion: API_VERSION, kind: 'Project', metadata: { name }, spec: {} };
    return (await kube.custom.createClusterCustomObject({ group: 'agentplane.io', version: 'v1alpha1', plural: 'projects', body })) as Project;
  }

  /** Someone else writing the object: bumps its resourceVersion. */
  async function touch(name: string): Promise<void> {
    await kube.custom.patchClusterCustomObject(
      { group: 'agentplane.io', version: 'v1alpha1', plural: 'projects', name, body: { metadata: { labels: { touched: String(Date.now()) } } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  }

  describe('leader election', () => {
    function elector(identity: string, leaseName: string, events: string[]) {
      return new LeaderElector({
        kube,
        namespace: OPERATOR_NAMESPACE,
        leaseName,
        identity,
        leaseSeconds: 3,
        renewSeconds: 1,
        logger: silentLogger(),
        onStartedLeading: () => events.push(`${identity} started`),
        onStoppedLeading: () => events.push(`${identity} stopped`),
      });
    }

    it('lets exactly one of two replicas lead, and the other take over as soon as the leader stops', async () => {
      const events: string[] = [];
      const a = elector('replica-a', 'two-replicas', events);
      const b = elector('replica-b', 'two-replicas', events);
      a.start();
      b.start();
      const leader = await eventually(() => (a.isLeader() ? a : b.isLeader() ? b : false), { what: 'a leader' });
      const standby = leader === a ? b : a;
      // Over several renewals, never both.
      for (let i = 0; i < 15; i += 1) {
        expect([a.isLeader(), b.isLeader()].filter(Boolean)).toHaveLength(1);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const lease = await kube.coordination.readNamespacedLease({ name: 'two-replicas', namespace: OPERATOR_NAMESPACE });
      expect(lease.spec?.holderIdentity).toBe(leader === a ? 'replica-a' : 'replica-b');

      await leader.stop();
      expect(leader.isLeader()).toBe(false);
      // Released, not left to expire: the standby takes it on its next try.
      await eventually(() => standby.isLeader(), { what: 'the standby leading', timeoutMs: 10_000 });
      const taken = await kube.coordination.readNamespacedLease({ name: 'two-replicas', namespace: OPERATOR_NAMESPACE });
      expect(taken.spec?.holderIdentity).toBe(standby === a ? 'replica-a' : 'replica-b');
      expect(taken.spec?.leaseTransitions).toBeGreaterThanOrEqual(0);
      await standby.stop();
      const first = leader === a ? 'replica-a' : 'replica-b';
      const second = leader === a ? 'replica-b' : 'replica-a';
      expect(events).toEqual([`${first} started`, `${first} stopped`, `${second} started`, `${second} stopped`]);
    });

    it('stops leading when it cannot renew, before the lease expires, and another replica takes over', async () => {
      const link = await startTcpLink(new URL(cluster.server));
      try {
        const direct = cluster.kubeConfig();
        const relayed = new k8s.KubeConfig();
        relayed.loadFromOptions({
          clusters: direct.clusters.map((c) => ({ ...c, server: link.url.replace('http://', 'https://') })),
          users: direct.users,
          contexts: direct.contexts,
          currentContext: direct.currentContext,
        });
        const events: string[] = [];
        const cutOff = new LeaderElector({
          kube: new KubeClient(relayed),
          namespace: OPERATOR_NAMESPACE,
          leaseName: 'partitioned',
          identity: 'replica-cut-off',
          leaseSeconds: 3,
          renewSeconds: 1,
          logger: silentLogger(),
          onStartedLeading: () => events.push('cut-off started'),
          onStoppedLeading: () => events.push('cut-off stopped'),
        });
        cutOff.start();
        await eventually(() => cutOff.isLeader(), { what: 'leading through the link' });
        const other = elector('replica-other', 'partitioned', events);
        other.start();
        link.cut();
        await eventually(() => !cutOff.isLeader(), { what: 'stepping down' });
        // It stepped down before the other could take the lease.
        expect(events).toEqual(['cut-off started', 'cut-off stopped']);
        await eventually(() => other.isLeader(), { what: 'the other replica leading', timeoutMs: 15_000 });
        link.restore();
        await other.stop();
        await cutOff.stop();
      } finally {
        await link.stop();
      }
    });

    it('steps down when another holder takes the lease', async () => {
      const events: string[] = [];
      const a = elector('replica-a', 'taken-away', events);
      a.start();
      await eventually(() => a.isLeader(), { what: 'leading' });
      const lease = await kube.coordination.readNamespacedLease({ name: 'taken-away', namespace: OPERATOR_NAMESPACE });
      const now = new k8s.V1MicroTime();
      await kube.coordination.replaceNamespacedLease({
        name: 'taken-away',
        namespace: OPERATOR_NAMESPACE,
        body: { ...lease, spec: { ...lease.spec, holderIdentity: 'intruder', renewTime: now, acquireTime: now, leaseDurationSeconds: 60 } },
      });
      await eventually(() => !a.isLeader(), { what: 'stepping down' });
      expect(events).toEqual(['replica-a started', 'replica-a stopped']);
      await a.stop();
      // It never wrote the lease back while the other holder's term ran.
      const after = await kube.coordination.readNamespacedLease({ name: 'taken-away', namespace: OPERATOR_NAMESPACE });
      expect(after.spec?.holderIdentity).toBe('intruder');
    });
  });

  describe('status writer', () => {
    it('writes only what changed, keeps lastTransitionTime until the status flips, and retries on conflict', async () => {
      await createProject('status-writer');
      // Each write happens a minute after the one before, as far as the conditions can tell.
      let minutes = 0;
      const ready = (status: 'True' | 'False', message: string) => (s: NonNullable<Project['status']>, p: Project) => {
        const now = new Date(Date.now() + 60_000 * minutes++);
        s.conditions = setCondition(s.conditions, { type: 'Ready', status, reason: status === 'True' ? 'RuntimeReady' : 'Provisioning', message }, p.metadata.generation, now);
      };
      const first = await writeStatus(kube, 'Project', 'status-writer', undefined, [ready('False', 'starting')]);
      expect(first?.written).toBe(true);
      const since = first!.object.status!.conditions![0]!.lastTransitionTime;

      const again = await writeStatus(kube, 'Project', 'status-writer', undefined, [ready('False', 'starting')]);
      expect(again?.written).toBe(false);

      // Another writer changes the object between our read and our write, twice: each 409 re-reads and re-applies.
      let interferences = 2;
      const interfering = new KubeClient(cluster.kubeConfig());
      const replace = interfering.replaceStatus.bind(interfering);
      interfering.replaceStatus = (async (kind: 'Project', object: Project) => {
        if (interferences-- > 0) await touch('status-writer');
        return replace(kind, object);
      }) as typeof interfering.replaceStatus;
      const changed = await writeStatus(interfering, 'Project', 'status-writer', undefined, [ready('False', 'still starting')]);
      expect(changed).toMatchObject({ written: true, conflicts: 2 });
      expect(changed!.object.status!.conditions![0]).toMatchObject({ message: 'still starting', lastTransitionTime: since });
      expect(changed!.object.metadata.labels?.touched).toBeDefined();

      const flipped = await writeStatus(kube, 'Project', 'status-writer', undefined, [ready('True', 'serving')]);
      expect(flipped?.written).toBe(true);
      expect(flipped!.object.status!.conditions![0]!.lastTransitionTime).not.toBe(since);
    });

    it('answers null for an object that is gone', async () => {
      expect(await writeStatus(kube, 'Project', 'never-created', undefined, [])).toBeNull();
    });
  });

  describe('finalizers', () => {
    it('adds ours once, keeps finalizers others add concurrently, and removes ours only after the erase is done', async () => {
      const project = await createProject('finalized');
      const added = await ensureFinalizer(kube, 'Project', project, 'agentplane.io/project-erase');
      expect(added?.metadata.finalizers).toEqual(['agentplane.io/project-erase']);
      // Present already: no write, same resourceVersion.
      const unchanged = await ensureFinalizer(kube, 'Project', added!, 'agentplane.io/project-erase');
      expect(unchanged?.metadata.resourceVersion).toBe(added!.metadata.resourceVersion);

      // Someone adds their own finalizer after we read: our stale patch gets 409 and is redone on a fresh read.
      const stale = await kube.getCustom('Project', 'finalized');
      await kube.patchCustomMetadata('Project', stale!, { finalizers: ['agentplane.io/project-erase', 'example.com/other'] });
      const withOther = await ensureFinalizer(kube, 'Project', { ...stale!, metadata: { ...stale!.metadata, finalizers: [] } }, 'agentplane.io/project-erase');
      expect(withOther?.metadata.finalizers).toEqual(['agentplane.io/project-erase', 'example.com/other']);

      await kube.deleteCustom('Project', 'finalized');
      const deleting = (await kube.getCustom('Project', 'finalized'))!;
      expect(deleting.metadata.deletionTimestamp).toBeDefined();
      const pending = await finalize(kube, 'Project', deleting, 'agentplane.io/project-erase', async () => ({ done: false }));
      expect(pending.done).toBe(false);
      expect((await kube.getCustom('Project', 'finalized'))?.metadata.finalizers).toContain('agentplane.io/project-erase');

      const done = await finalize(kube, 'Project', deleting, 'agentplane.io/project-erase', async () => ({ done: true }));
      expect(done.done).toBe(true);
      expect((await kube.getCustom('Project', 'finalized'))?.metadata.finalizers).toEqual(['example.com/other']);
      await kube.patchCustomMetadata('Project', (await kube.getCustom('Project', 'finalized'))!, { finalizers: [] });
      await eventually(async () => (await kube.getCustom('Project', 'finalized')) === null, { what: 'project gone' });
    });
  });

  describe('the operator program', () => {
    it('serves health, readiness and metrics, and on SIGTERM releases its lease and exits 0', async () => {
      const port = await freePort();
      const child = spawn(process.execPath, [...typeScriptNodeArgs, 'operator/src/main.ts'], {
        cwd: repoRoot,
        env: {
          ...process.env,
          KUBECONFIG: cluster.kubeconfigPath,
          OPERATOR_NAMESPACE,
          OPERATOR_PORT: String(port),
          HOST: '127.0.0.1',
          POD_NAME: 'operator-main',
          LEADER_ELECTION_LEASE: 'main-program',
          LOG_FORMAT: 'json',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        const url = `http://127.0.0.1:${port}`;
        await eventually(async () => (await fetch(`${url}/ready`)).status === 200, { what: `/ready (${output.slice(-500)})`, timeoutMs: 60_000 });
        expect((await fetch(`${url}/health`)).status).toBe(200);
        await eventually(async () => /agentplane_operator_leader 1/.test(await (await fetch(`${url}/metrics`)).text()), { what: 'leading' });
        const metrics = await (await fetch(`${url}/metrics`)).text();
        expect(metrics).toContain('agentplane_operator_queue_depth');
        expect(metrics).toContain('process_resident_memory_bytes');
      } finally {
        child.kill('SIGTERM');
      }
      expect(await exited).toBe(0);
      const lease = await kube.coordination.readNamespacedLease({ name: 'main-program', namespace: OPERATOR_NAMESPACE });
      expect(lease.spec?.holderIdentity ?? '').toBe('');
    });
  });
  describe('watch caches', () => {
    it('keep what the operator made without its field ownership records, through the list and every event after', async () => {
      const core = cluster.kubeConfig().makeApiClient(k8s.CoreV1Api);
      const labels = { [LABELS.managedBy]: MANAGED_BY };
      await core.createNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, body: { metadata: { name: 'listed', labels }, data: { a: '1' } } });
      const cache = new OwnedObjectCache(cluster.kubeConfig(), [{ apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps' }], silentLogger());
      await Promise.all(cache.watches.map((watch) => watch.start()));
      try {
        const ref = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', namespace: OPERATOR_NAMESPACE, name });
        // The API server keeps ownership records on each object; the cache does not, from the list on.
        expect((await core.readNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, name: 'listed' })).metadata?.managedFields?.length).toBeGreaterThan(0);
        const listed = cache.get<k8s.V1ConfigMap>(ref('listed'));
        expect(listed?.data).toEqual({ a: '1' });
        expect(listed?.metadata).not.toHaveProperty('managedFields');

        // An object added, then changed, while the watch runs.
        await core.createNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, body: { metadata: { name: 'watched', labels }, data: { b: '1' } } });
        await core.patchNamespacedConfigMap(
          { namespace: OPERATOR_NAMESPACE, name: 'watched', body: { data: { b: '2' } } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
        const watched = await eventually(() => {
          const object = cache.get<k8s.V1ConfigMap>(ref('watched'));
          return object?.data?.b === '2' ? object : false;
        }, { what: 'the change in the cache' });
        expect(watched.metadata).not.toHaveProperty('managedFields');
      } finally {
        await Promise.all(cache.watches.map((watch) => watch.stop()));
      }
    });
  });
});
