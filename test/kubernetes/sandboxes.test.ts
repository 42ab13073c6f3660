// Sandboxes through the data plane on Kubernetes, provisioned as in production (docs/decisions/0081): the operator
// makes the project's namespace, the runtime's identity bound to the chart's own runtime ClusterRole, the
// NetworkPolicies and the sandbox quota, and the runtime's Deployment. The runtime Pod is stood in for by a runtime
// process with that Deployment's computer settings, acting as the runtime's ServiceAccount (a token from the
// TokenRequest API), so every Pod, claim and exec below is done with exactly the runtime's RBAC, on a real kubelet
// with containerd and runc where the Pods really run. Last, an agent turn uses the conversation's sandbox there.
import * as k8s from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Operator } from '@agentplane/operator/app';
import { renderChart, serviceAccountKubeconfig } from '../chart/install.js';
import { eventually } from '../harness/eventually.js';
import { kubeletBinaries, localStorageClass, sandboxImage, startKubelet, type RunningKubelet } from '../harness/kubelet.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { requireBinary } from '../harness/process.js';
import { configuredTenant, startTestRuntime, type TestRuntime, type TestTenant } from '../harness/runtime.js';
import { allEvents } from '../harness/sse.js';
import { chatWorld, MODEL } from '../chat/fixture.js';
import { Admin, installCrds, operatorConfig, prepareCluster, startOperator } from '../operator/fixture.js';
import { tarOf } from '../harness/tar.js';

const binaries = kubernetesBinaries();
const nodeBinaries = binaries ? kubeletBinaries() : null;
const helm = requireBinary('helm');
const ceiling = { capabilities: ['chat', 'computer'] };
const PROJECT = 'sandboxes';
const namespace = `agentplane-${PROJECT}`;


const status = (error: unknown) => (error as { code?: number }).code;

describe.skipIf(!binaries || !nodeBinaries || !helm)('sandboxes on Kubernetes, provisioned by the operator, through the data plane', () => {
  let cluster: KubernetesCluster;
  let node: RunningKubelet;
  let operator: Operator;
  let rt: TestRuntime;
  let t: TestTenant;
  let alice: string;
  let core: k8s.CoreV1Api;
  /** The cluster as the runtime's ServiceAccount sees it. */
  let asRuntime: k8s.KubeConfig;
  /** The runtime's environment as the operator wrote it, with the ServiceAccount's kubeconfig. */
  let runtimeEnv: Record<string, string>;

  const call = (path: string, token: string, init: RequestInit = {}) => rt.endUser(path, token, init);
  const post = (path: string, token: string, body: unknown = {}) => call(path, token, { method: 'POST', body: JSON.stringify(body) });
  const create = async (token = alice) => {
    const res = await post('/computers/sessions', token, { name: 'box' });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string; state: string };
  };
  const exec = async (id: string, body: unknown, token = alice) => {
    const res = await post(`/computers/sessions/${id}/exec`, token, body);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const upload = (id: string, form: FormData) => call(`/computers/sessions/${id}/files`, alice, { method: 'POST', body: form });
  const podOf = (id: string) => core.readNamespacedPod({ name: `sandbox-${id}`, namespace }).catch((error: unknown) => (status(error) === 404 ? undefined : Promise.reject(error)));
  const claimOf = (id: string) =>
    core.readNamespacedPersistentVolumeClaim({ name: `sandbox-${id}-workspace`, namespace }).catch((error: unknown) => (status(error) === 404 ? undefined : Promise.reject(error)));

  beforeAll(async () => {
    cluster = await startKubernetes(binaries!, { kwok: false, kubelet: true });
    node = await startKubelet(cluster, nodeBinaries!);
    const kc = cluster.kubeConfig();
    core = kc.makeApiClient(k8s.CoreV1Api);
    await installCrds(kc);
    // The runtime's permissions are the chart's, not a copy of them.
    await prepareCluster(kc, { runtimeClusterRole: false });
    const [role] = await renderChart(helm!, { args: ['--show-only', 'templates/runtime-clusterrole.yaml'] });
    await kc.makeApiClient(k8s.RbacAuthorizationV1Api).createClusterRole({ body: role as k8s.V1ClusterRole });
    operator = await startOperator(
      cluster,
      operatorConfig({
        RUNTIME_SANDBOX_IMAGE: sandboxImage,
        RUNTIME_SANDBOX_IMAGE_PULL_POLICY: 'Never',
        RUNTIME_SANDBOX_STORAGE_CLASS: localStorageClass,
        RUNTIME_TASK_CRONJOBS: 'false',
        // The runtime's own Pod cannot start here (no such image); the stand-in below serves instead.
        RUNTIME_IMAGE_PULL_POLICY: 'Never',
        RUNTIME_URL_TEMPLATE: 'http://127.0.0.1:9',
      }),
    );
    await new Admin(kc).createProject(PROJECT, { computer: { maxSandboxes: 2 } });
    const deployment = await eventually(() => kc.makeApiClient(k8s.AppsV1Api).readNamespacedDeployment({ name: 'agent-runtime', namespace }), {
      what: "the operator's runtime Deployment",
      timeoutMs: 60_000,
    });
    // The quota is live once the controller has counted what the namespace holds.
    await eventually(async () => (await core.readNamespacedResourceQuota({ name: 'sandboxes', namespace })).status?.hard?.persistentvolumeclaims === '2', {
      what: 'the sandbox quota counted',
      timeoutMs: 60_000,
    });
    const env = Object.fromEntries(
      (deployment.spec!.template.spec!.containers[0]!.env ?? [])
        .filter((variable) => variable.name.startsWith('COMPUTER_') || variable.name === 'KUBERNETES_NAMESPACE')
        .map((variable) => [variable.name, variable.value ?? '']),
    );
    expect(env).toMatchObject({ COMPUTER_HOST: 'kubernetes', KUBERNETES_NAMESPACE: namespace, COMPUTER_NETWORK_POLICY: 'operator' });
    const kubeconfig = await serviceAccountKubeconfig(cluster, namespace, 'agent-runtime');
    asRuntime = new k8s.KubeConfig();
    asRuntime.loadFromFile(kubeconfig);
    runtimeEnv = { ...env, KUBECONFIG: kubeconfig, COMPUTER_SWEEP_MS: '500' };
    rt = await startTestRuntime({ env: runtimeEnv });
    t = await configuredTenant(rt, { ceiling });
    await t.reconfigure({ computer: { max_sandboxes: 2, memory_mib: 256, disk_mib: 64, command_timeout_seconds: 20 } });
    alice = await t.mint({ sub: 'acme:alice', scope: 'acme:alice' });
  }, 300_000);

  // Each test starts with the project's count free.
  afterEach(async () => {
    const listed = (await (await call('/computers/sessions?limit=100', alice)).json()) as { sandboxes: Array<{ id: string }> };
    for (const box of listed.sandboxes) await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' });
  });

  afterAll(async () => {
    await rt?.stop();
    await operator?.stop();
    await node?.stop();
    await cluster?.stop();
  });

  it('runs commands in a restricted Pod of the project namespace, streams them, and ends a timed-out tree', async () => {
    const host = await call('/computers/host', alice);
    expect(await host.json()).toMatchObject({ kind: 'kubernetes', network: 'none', settings: { max_sandboxes: 2 } });
    const box = await create();
    expect(box.state).toBe('running');
    const pod = (await podOf(box.id))!;
    expect(pod.metadata!.labels).toMatchObject({ 'app.kubernetes.io/component': 'sandbox', 'agentplane.io/sandbox': box.id });
    expect(pod.spec).toMatchObject({ automountServiceAccountToken: false, securityContext: { runAsNonRoot: true } });
    expect(pod.spec!.containers[0]!.image).toBe(sandboxImage);
    expect((await claimOf(box.id))!.spec!.storageClassName).toBe(localStorageClass);

    const shell = await exec(box.id, { command: 'id -u; pwd; echo "$WHO"; cat; exit 7', env: { WHO: 'me' }, stdin: 'piped\n' });
    expect(shell).toMatchObject({ status: 200, body: { exit_code: 7, stdout: '1000\n/workspace\nme\npiped\n', timed_out: false } });
    const argv = await exec(box.id, { command: ['/bin/echo', 'a b', '$HOME'] });
    expect(argv.body).toMatchObject({ exit_code: 0, stdout: 'a b $HOME\n' });
    const slow = await exec(box.id, { command: 'setsid sleep 300 & sleep 300', timeout_seconds: 2 });
    expect(slow.body).toMatchObject({ timed_out: true, exit_code: null });
    // The whole tree is gone, the setsid'd child included, and nothing is left a zombie: the Pod's init reaps.
    const left = 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done | grep -c "^sleep 300" || true; grep -l "^State:.*Z" /proc/[0-9]*/status 2>/dev/null | wc -l';
    await eventually(async () => (await exec(box.id, { command: left })).body.stdout === '0\n0\n', { what: "the timed-out exec's processes ended and reaped" });

    const streamed = await call(`/computers/sessions/${box.id}/exec`, alice, {
      method: 'POST',
      headers: { accept: 'text/event-stream' },
      body: JSON.stringify({ command: 'echo one; echo two >&2' }),
    });
    const events = await allEvents(streamed);
    expect(events.at(-1)).toMatchObject({ event: 'exit', data: { exit_code: 0 } });
    expect(events.filter((event) => event.event === 'stdout').map((event) => (event.data as { data: string }).data).join('')).toBe('one\n');
    expect(events.filter((event) => event.event === 'stderr').map((event) => (event.data as { data: string }).data).join('')).toBe('two\n');

    // What it uses, read inside the Pod: its main process and the one left running, and the file just written.
    await exec(box.id, { command: 'head -c 300000 /dev/zero > blob; nohup sleep 100 >/dev/null 2>&1 &' });
    // (Once the timed-out exec's reaper, a process of ours too, has finished its rounds.)
    const seen = await eventually(async () => {
      const got = (await (await call(`/computers/sessions/${box.id}`, alice)).json()) as { usage: Record<string, number | null> };
      return got.usage.processes === 2 ? got : undefined;
    }, { what: 'two processes counted' });
    expect(seen.usage).toMatchObject({ memory_bytes: expect.any(Number), cpu_seconds: expect.any(Number), processes: 2 });
    expect(seen.usage.memory_bytes).toBeGreaterThan(0);
    expect(seen.usage.disk_bytes).toBeGreaterThanOrEqual(300_000);

    expect((await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' })).status).toBe(200);
    await eventually(async () => (await podOf(box.id)) === undefined && (await claimOf(box.id)) === undefined, { what: 'the Pod and the claim removed' });
  });

  it('moves files in and out of the claim, refusing links and paths that leave /workspace; a pause keeps them', async () => {
    const box = await create();
    const one = new FormData();
    one.append('path', 'notes/hello.txt');
    one.append('file', new Blob(['hello file']), 'x.txt');
    expect((await upload(box.id, one)).status).toBe(201);
    const archive = new FormData();
    archive.append('unpack', 'true');
    archive.append('path', 'unpacked');
    archive.append('file', new Blob([await tarOf([{ name: 'x/y.txt', body: 'deep' }])]), 'a.tar');
    expect((await upload(box.id, archive)).status).toBe(201);
    const hostile = new FormData();
    hostile.append('unpack', 'true');
    hostile.append('path', 'hostile');
    hostile.append('file', new Blob([await tarOf([{ name: 'evil', type: 'symlink', linkname: '/etc' }, { name: 'evil/x', body: 'x' }])]), 'evil.tar');
    const refused = await upload(box.id, hostile);
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { code: string }).code).toBe('unsafe_path');
    await exec(box.id, { command: 'ln -s /etc out' });
    expect((await call(`/computers/sessions/${box.id}/files?path=out/hostname`, alice)).status).toBe(400);

    // Pause ends the Pod and keeps the claim; exec waits for a resume, which makes the Pod again.
    const paused = await post(`/computers/sessions/${box.id}/pause`, alice);
    expect(await paused.json()).toMatchObject({ state: 'paused' });
    expect(await podOf(box.id)).toBeUndefined();
    expect(await claimOf(box.id)).toBeDefined();
    expect(await exec(box.id, { command: 'true' })).toMatchObject({ status: 409, body: { code: 'sandbox_paused' } });
    expect(await (await post(`/computers/sessions/${box.id}/resume`, alice)).json()).toMatchObject({ state: 'running' });
    expect((await exec(box.id, { command: 'cat notes/hello.txt unpacked/x/y.txt' })).body.stdout).toBe('hello filedeep');
    const download = await call(`/computers/sessions/${box.id}/files?path=notes/hello.txt`, alice);
    expect(download.status).toBe(200);
    expect(await download.text()).toBe('hello file');
    expect((await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' })).status).toBe(200);
  });

  it("holds the project's count twice: by the runtime's own count, and by the namespace's quota on claims", async () => {
    const first = await create();
    const second = await create();
    const third = await post('/computers/sessions', alice, { name: 'one too many' });
    expect(third.status).toBe(409);
    // Another tenant of the project has its own count free, but the namespace holds no more claims.
    const other = await configuredTenant(rt, { ceiling });
    await other.reconfigure({ computer: { max_sandboxes: 2, memory_mib: 256, disk_mib: 64 } });
    const dan = await other.mint({ sub: 'acme:dan', scope: 'acme:dan' });
    const refused = await post('/computers/sessions', dan, {});
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ code: 'too_many_sandboxes', detail: expect.stringContaining('exceeded quota: sandboxes') });
    // Nothing was made, and the refused one holds no place.
    expect(((await (await call('/computers/sessions', dan)).json()) as { sandboxes: unknown[] }).sandboxes).toEqual([]);
    expect((await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=sandbox' })).items).toHaveLength(2);

    // Even a runtime that miscounted could not hold more: the quota refuses its ServiceAccount a third claim.
    const asRuntimeCore = asRuntime.makeApiClient(k8s.CoreV1Api);
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: unknown) => error,
      );
    const over = await refusal(
      asRuntimeCore.createNamespacedPersistentVolumeClaim({
        namespace,
        body: { metadata: { name: 'one-too-many' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '16Mi' } }, storageClassName: localStorageClass } },
      }),
    );
    expect(status(over)).toBe(403);
    expect(String((over as { body?: unknown }).body)).toContain('exceeded quota');
    // And the runtime may not widen its own fences.
    const widened = await refusal(
      asRuntime
        .makeApiClient(k8s.NetworkingV1Api)
        .createNamespacedNetworkPolicy({ namespace, body: { metadata: { name: 'let-me-out' }, spec: { podSelector: {}, egress: [{}], policyTypes: ['Egress'] } } }),
    );
    expect(status(widened)).toBe(403);
    const raised = await refusal(
      asRuntimeCore.patchNamespacedResourceQuota(
        { name: 'sandboxes', namespace, body: { spec: { hard: { persistentvolumeclaims: '100' } } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
    expect(status(raised)).toBe(403);

    for (const box of [first, second]) expect((await call(`/computers/sessions/${box.id}`, alice, { method: 'DELETE' })).status).toBe(200);
    // Once the claims are gone and counted, the other tenant gets its sandbox.
    await eventually(async () => (await core.readNamespacedResourceQuota({ name: 'sandboxes', namespace })).status?.used?.persistentvolumeclaims === '0', { what: 'the quota freed' });
    const made = await post('/computers/sessions', dan, {});
    expect(made.status, await made.clone().text()).toBe(201);
    await call(`/computers/sessions/${((await made.json()) as { id: string }).id}`, dan, { method: 'DELETE' });
  });

  it("a tenant's erase removes its sandboxes' Pods and claims before its rows", async () => {
    const other = await configuredTenant(rt, { ceiling });
    await other.reconfigure({ computer: { max_sandboxes: 2, memory_mib: 256, disk_mib: 64 } });
    const theirs = await create(await other.mint({ sub: 'acme:dan', scope: 'acme:dan' }));
    expect(await podOf(theirs.id)).toBeDefined();
    const erased = await rt.admin(`/tenants/${other.tenantId}`, { method: 'DELETE' });
    expect(erased.status).toBe(200);
    expect(await erased.json()).toMatchObject({ steps: expect.arrayContaining([expect.objectContaining({ step: 'sandboxes', outcome: 'done', items: 1 })]) });
    expect(await podOf(theirs.id)).toBeUndefined();
    expect(await claimOf(theirs.id)).toBeUndefined();
  });

  it("gives the agent the conversation's sandbox as a Pod: made on its first call, ended at the turn's end with its claim kept, made again next turn", async () => {
    const world = await chatWorld(runtimeEnv);
    try {
      const ceiling = world.tenant.configuration.ceiling;
      await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'computer'] }, computer: { max_sandboxes: 1, memory_mib: 256, disk_mib: 64 } });
      const token = await world.token({ capabilities: ['chat', 'computer'], sub: 'acme:erin', scope: 'acme:erin' });
      world.fake.script(
        { toolCalls: [{ id: 'c1', name: 'write_file', arguments: JSON.stringify({ path: 'calc.sh', content: 'echo $((6 * 7))\n' }) }] },
        { toolCalls: [{ id: 'c2', name: 'run_command', arguments: JSON.stringify({ command: 'sh calc.sh > answer.txt; cat answer.txt' }) }] },
        'The answer is 42.',
      );
      const { response, events } = await world.streamAll(token, { message: 'compute 6*7', model: MODEL });
      expect(response.status).toBe(200);
      const ends = events.filter((event) => event.event === 'tool_end').map((event) => event.data as { name: string; ok: boolean; result: string });
      expect(ends.map((end) => [end.name, end.ok])).toEqual([
        ['write_file', true],
        ['run_command', true],
      ]);
      expect(ends[1]!.result).toContain('exit code 0');
      const sessionId = (events.at(-1)!.data as { session_id: string }).session_id;
      const listed = (await (await world.rt.endUser('/computers/sessions', token)).json()) as { sandboxes: Array<{ id: string; session_id: string }> };
      const box = listed.sandboxes.find((sandbox) => sandbox.session_id === sessionId)!;
      // Paused at the turn's end: on Kubernetes its Pod is gone and its claim kept.
      await eventually(async () => ((await (await world.rt.endUser(`/computers/sessions/${box.id}`, token)).json()) as { state: string }).state === 'paused');
      expect(await podOf(box.id)).toBeUndefined();
      expect(await claimOf(box.id)).toBeDefined();

      world.fake.script({ toolCalls: [{ id: 'c3', name: 'read_file', arguments: JSON.stringify({ path: 'answer.txt' }) }] }, 'Still 42.');
      expect((await world.chat(token, { message: 'read it back', session_id: sessionId, model: MODEL })).status).toBe(200);
      const toolMessages = world.fake.chatRequests().at(-1)!.messages.filter((message) => message.role === 'tool') as Array<{ content: string }>;
      expect(toolMessages.at(-1)!.content).toBe('42\n');
      await world.rt.endUser(`/computers/sessions/${box.id}`, token, { method: 'DELETE' });
    } finally {
      await world.stop();
    }
  });
});
