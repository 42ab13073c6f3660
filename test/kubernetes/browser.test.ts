// The agent's browser on Kubernetes (docs/decisions/0092), provisioned as in production: the operator makes the
// project's namespace with the browser Deployment (the browser server's image, restricted, no API token), its
// Service, the token in the runtime Secret and the NetworkPolicies; the kubelet runs the Pod with containerd and
// runc. A runtime with the runtime Deployment's browser settings (its endpoint pointed at the Pod's address: the
// test node has no Service proxy; this machine is on the Pods' bridge) drives that Chromium: the agent opens a page and hands it over, the person signs
// in through the frame and input routes, and the agent resumes on the page as left. The Pod's own guard keeps
// pages off private addresses it was not told to allow.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Operator } from '@agentplane/operator/app';
import { RemoteBrowserSource } from '@agentplane/runtime/browsers/remote';
import { browserBase, browserImage, buildBrowserImage } from '../harness/browser-image.js';
import { eventually } from '../harness/eventually.js';
import { captureLogs } from '../harness/logs.js';
import { kubeletBinaries, startKubelet, type RunningKubelet } from '../harness/kubelet.js';
import { kubernetesBinaries, startKubernetes, type KubernetesCluster } from '../harness/kubernetes.js';
import { configuredTenant, startTestRuntime, type TestRuntime, type TestTenant } from '../harness/runtime.js';
import { allEvents } from '../harness/sse.js';
import { FakeOpenAIServer, type ChatRequest } from '../fakes/openai-server.js';
import { MODEL, providerSection } from '../chat/fixture.js';
import { Admin, installCrds, operatorConfig, prepareCluster, startOperator } from '../operator/fixture.js';

const binaries = kubernetesBinaries();
const nodeBinaries = binaries ? kubeletBinaries() : null;
const base = nodeBinaries ? browserBase() : null;
const PROJECT = 'browsing';
const namespace = `agentplane-${PROJECT}`;
const CAPABILITIES = ['chat', 'browser', 'browser_handoff', 'input:image'];

const call = (name: string, args: Record<string, unknown>) => ({ toolCalls: [{ name, arguments: args }] });
const lastTool = (request: ChatRequest) => String([...request.messages].reverse().find((message) => message.role === 'tool')?.content ?? '');

describe.skipIf(!binaries || !nodeBinaries || !base)('the browser Pod on Kubernetes, provisioned by the operator', () => {
  let cluster: KubernetesCluster;
  let node: RunningKubelet;
  let operator: Operator;
  let core: k8s.CoreV1Api;
  let site: Server;
  let siteUrl: string;
  /** A service on the node's private address that no page was allowed: it records every connection. */
  let privateService: Server;
  let privateUrl: string;
  let privateConnections = 0;
  const logins: string[] = [];
  let fake: FakeOpenAIServer;
  let rt: TestRuntime;
  let tenant: TestTenant;
  let pod: k8s.V1Pod;
  let token: string;
  let removeImage = () => {};
  let operatorEnv: Record<string, string>;

  /** The browser Pod that is running and ready and matches `which`. */
  const readyBrowserPod = (which: (pod: k8s.V1Pod) => boolean) =>
    eventually(
      async () => {
        const pods = await core.listNamespacedPod({ namespace, labelSelector: 'app.kubernetes.io/component=browser' });
        const ready = pods.items.find((item) => which(item) && !item.metadata?.deletionTimestamp && item.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True'));
        if (!ready) throw new Error(`no browser Pod ready yet: ${JSON.stringify(pods.items.map((item) => item.status?.containerStatuses?.[0]?.state))}`);
        return ready;
      },
      { what: "the operator's browser Pod running and ready", timeoutMs: 180_000, intervalMs: 500 },
    );
  const servingLine = (log: string) => log.split('\n').map((line) => (line.startsWith('{') ? (JSON.parse(line) as Record<string, unknown>) : {})).find((entry) => entry.msg === 'serving the browser');
  const logs = captureLogs('warn');

  beforeAll(async () => {
    const listening = (server: Server) => new Promise<number>((resolve) => server.listen(0, '0.0.0.0', () => resolve((server.address() as AddressInfo).port)));
    site = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://site');
      res.setHeader('Content-Type', 'text/html');
      const page = (title: string, body: string) =>
        res.end(`<!doctype html><html><head><title>${title}</title><style>body{margin:0} input{position:absolute;left:100px;width:200px;height:30px} #user{top:100px}</style></head><body>${body}</body></html>`);
      if (url.pathname === '/login') return page('Sign in', '<form action="/welcome"><input id="user" name="user" aria-label="User"></form>');
      if (url.pathname === '/welcome') {
        logins.push(url.searchParams.get('user') ?? '');
        return page('Welcome', `<h1>Welcome, ${(url.searchParams.get('user') ?? '').replace(/[^a-z]/g, '')}</h1>`);
      }
      res.writeHead(404).end();
    });
    privateService = createServer((_req, res) => res.end('<title>Private</title>'));
    privateService.on('connection', () => privateConnections++);

    cluster = await startKubernetes(binaries!, { kwok: false, kubelet: true });
    node = await startKubelet(cluster, nodeBinaries!, { hostOnBridge: true });
    const built = await buildBrowserImage(base!);
    removeImage = built.remove;
    await node.importImage(built.archive, browserImage);
    siteUrl = `http://${node.bridgeAddress!}:${await listening(site)}`;
    privateUrl = `http://${node.bridgeAddress!}:${await listening(privateService)}/`;

    const kc = cluster.kubeConfig();
    core = kc.makeApiClient(k8s.CoreV1Api);
    await installCrds(kc);
    await prepareCluster(kc);
    operatorEnv = {
      RUNTIME_BROWSER_IMAGE: browserImage,
      RUNTIME_BROWSER_IMAGE_PULL_POLICY: 'Never',
      // The test's site is on a private address: allowed by name, as an intranet site would be.
      RUNTIME_BROWSER_ALLOWED_DESTINATIONS: new URL(siteUrl).host,
      RUNTIME_BROWSER_MEMORY_LIMIT: '2Gi',
      RUNTIME_TASK_CRONJOBS: 'false',
      // The runtime's own Pod cannot start here (no such image); the runtime below stands in for it.
      RUNTIME_IMAGE_PULL_POLICY: 'Never',
      RUNTIME_URL_TEMPLATE: 'http://127.0.0.1:9',
    };
    operator = await startOperator(cluster, operatorConfig(operatorEnv));
    await new Admin(kc).createProject(PROJECT);
    pod = await readyBrowserPod(() => true);
    const runtimeDeployment = await kc.makeApiClient(k8s.AppsV1Api).readNamespacedDeployment({ name: 'agent-runtime', namespace });
    const env = Object.fromEntries((runtimeDeployment.spec!.template.spec!.containers[0]!.env ?? []).filter((variable) => variable.name.startsWith('BROWSER_')).map((variable) => [variable.name, variable]));
    expect(env.BROWSER_HOST?.value).toBe('remote');
    expect(env.BROWSER_ENDPOINT?.value).toBe('ws://browser:8083');
    const secret = await core.readNamespacedSecret({ name: 'agentplane-runtime', namespace });
    expect(env.BROWSER_TOKEN?.valueFrom?.secretKeyRef).toEqual({ name: 'agentplane-runtime', key: 'browser-token' });
    token = Buffer.from(secret.data!['browser-token']!, 'base64').toString();

    fake = await FakeOpenAIServer.start({ apiKey: 'sk-test-browser-pod-01', chatModels: [MODEL] });
    rt = await startTestRuntime({
      logger: logs.logger,
      // The Service's name resolves in the cluster only; the Pod's address is what reaches it from here.
      env: { AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', BROWSER_HOST: 'remote', BROWSER_ENDPOINT: `ws://${pod.status!.podIP ?? ''}:8083`, BROWSER_TOKEN: token },
    });
    tenant = await configuredTenant(rt, { ceiling: { capabilities: CAPABILITIES, registeredModels: [MODEL] } });
    await tenant.reconfigure({ providers: providerSection(fake, [MODEL]), default_model: MODEL });
  }, 420_000);

  afterAll(async () => {
    await rt?.stop();
    await fake?.stop();
    await operator?.stop();
    await node?.stop();
    await cluster?.stop();
    site?.close();
    privateService?.close();
    removeImage();
  });

  const turn = async (bearer: string, message: string, sessionId?: string) => {
    const response = await rt.endUser('/chat/stream', bearer, { method: 'POST', body: JSON.stringify({ message, ...(sessionId ? { session_id: sessionId } : {}) }) });
    expect(response.status).toBe(200);
    const frames = (await allEvents(response)).map((event) => event.data as Record<string, unknown> & { type: string });
    const done = frames.find((frame) => frame.type === 'done') as (Record<string, unknown> & { session_id: string; requires_action: boolean; content: string }) | undefined;
    if (!done) throw new Error(`the turn did not end with done: ${JSON.stringify(frames.at(-1))}`);
    return { frames, done };
  };
  const post = (bearer: string, path: string, body: unknown) => rt.endUser(path, bearer, { method: 'POST', body: JSON.stringify(body) });

  it('runs in a restricted Pod of the project namespace, with no API token, its token nowhere in its log', async () => {
    expect(pod.spec).toMatchObject({ automountServiceAccountToken: false, securityContext: { runAsNonRoot: true, runAsUser: 10001 } });
    expect(pod.spec!.containers[0]).toMatchObject({ image: browserImage, securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } } });
    const log = await core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace });
    const serving = servingLine(log);
    expect(serving).toMatchObject({ port: 8083, executable: '/usr/bin/chromium' });
    // Under the container runtime's default seccomp profile Chromium cannot make the user namespaces its own sandbox
    // needs (decision 0092), and says so; the Pod runs, behind the guard and its fences.
    expect(serving).toMatchObject({ sandbox: false });
    expect(log).toContain('No usable sandbox');
    expect(log).not.toContain(token);
  });

  it("is the agent’s browser: it opens a page and hands it over; the person signs in; the agent resumes on the page as left, and a model that perceives images sees it", async () => {
    const alice = await tenant.mint({ sub: 'acme:alice', capabilities: CAPABILITIES });
    fake.script(call('browser_open', { url: `${siteUrl}/login` }), call('browser_handoff', { instructions: 'Please sign in.' }));
    const first = await turn(alice, 'Sign me in.');
    const ends = first.frames.filter((frame) => frame.type === 'tool_end');
    expect(ends.map((frame) => [frame.name, frame.ok]), `${JSON.stringify(ends)}\n${logs.text()}`).toEqual([
      ['browser_open', true],
      ['browser_handoff', true],
    ]);
    expect(first.done.requires_action).toBe(true);
    const sessionId = first.done.session_id;

    const frame = await post(alice, `/chat/sessions/${sessionId}/browser/frame`, {});
    expect(frame.status, await frame.clone().text()).toBe(200);
    expect(await frame.json()).toMatchObject({ mime_type: 'image/jpeg', title: 'Sign in', url: `${siteUrl}/login` });
    expect((await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'click', x: 150, y: 115 })).status).toBe(200);
    expect((await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'text', text: 'alice' })).status).toBe(200);
    const entered = await post(alice, `/chat/sessions/${sessionId}/browser/input`, { type: 'key', key: 'Enter' });
    expect(await entered.json()).toMatchObject({ title: 'Welcome' });
    expect(logins).toEqual(['alice']);

    fake.script(call('browser_snapshot', {}), (request) => `I see: ${lastTool(request).includes('Welcome, alice') ? 'signed in' : 'not signed in'}`);
    const resumed = await turn(alice, 'Done, I signed in.', sessionId);
    expect(resumed.done.content).toBe('I see: signed in');

    // A model that perceives images sees the Pod's page too: the picture reaches it as a JPEG data URI.
    fake.script(call('browser_screenshot', {}), 'I saw it.');
    const pictured = await turn(alice, 'Show me the page.', sessionId);
    expect(pictured.frames.find((frame) => frame.type === 'tool_end')).toMatchObject({ name: 'browser_screenshot', ok: true });
    const sent = fake.chatRequests().at(-1)!;
    const parts = sent.messages.filter((message) => message.role === 'user' && Array.isArray(message.content)).flatMap((message) => message.content as Array<{ type: string; image_url?: { url: string } }>);
    const picture = parts.find((part) => part.type === 'image_url')?.image_url?.url ?? '';
    expect(picture).toMatch(/^data:image\/jpeg;base64,/);
    expect(Buffer.from(picture.split(',')[1]!, 'base64').subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
  });

  it("keeps pages off private addresses the Pod's guard was not told to allow", async () => {
    const bob = await tenant.mint({ sub: 'acme:bob', capabilities: CAPABILITIES });
    fake.script(call('browser_open', { url: privateUrl }), (request) => lastTool(request));
    const { done } = await turn(bob, 'Open the private page.');
    expect(done.content).toContain('The browser opens public web pages only');
    expect(privateConnections).toBe(0);
  });

  it("gets Chromium's own sandbox, required, where a Localhost seccomp profile lets it make user namespaces", async () => {
    // The container runtime's default profile refuses user namespaces (the test above saw the sandbox off). A profile
    // that allows them, put on the node by the platform engineer, and named in the operator's settings: here a
    // permissive one that refuses a few dangerous calls; a real one would be the default plus user namespaces. Last:
    // the browser Pod is made again, and the runtime above knows the old one's address.
    const refused = ['kexec_load', 'kexec_file_load', 'init_module', 'finit_module', 'delete_module', 'reboot', 'swapon', 'swapoff', 'bpf', 'perf_event_open', 'add_key', 'request_key', 'keyctl'];
    mkdirSync(join(node.seccompProfileDir, 'agentplane'), { recursive: true });
    writeFileSync(join(node.seccompProfileDir, 'agentplane', 'chromium.json'), JSON.stringify({ defaultAction: 'SCMP_ACT_ALLOW', syscalls: [{ names: refused, action: 'SCMP_ACT_ERRNO' }] }));
    await operator.stop();
    operator = await startOperator(cluster, operatorConfig({ ...operatorEnv, RUNTIME_BROWSER_SECCOMP_PROFILE: 'agentplane/chromium.json' }));
    const sandboxed = await readyBrowserPod((candidate) => candidate.spec?.securityContext?.seccompProfile?.type === 'Localhost');
    expect(sandboxed.spec!.containers[0]!.securityContext!.seccompProfile).toEqual({ type: 'Localhost', localhostProfile: 'agentplane/chromium.json' });
    const log = await core.readNamespacedPodLog({ name: sandboxed.metadata!.name!, namespace });
    expect(servingLine(log)).toMatchObject({ sandbox: true });
    // And it serves: a context and a page on the sandboxed Chromium.
    const source = new RemoteBrowserSource({ endpoint: `ws://${sandboxed.status!.podIP ?? ''}:8083`, token, logger: logs.logger });
    try {
      const context = await (await source.browser()).newContext();
      const page = await context.newPage();
      await page.goto(`${siteUrl}/login`);
      expect(await page.title()).toBe('Sign in');
    } finally {
      await source.close();
    }
  });
});
