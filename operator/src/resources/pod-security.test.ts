// Every Pod template the operator builds must be admitted in a namespace that enforces Pod Security `restricted`.
// The checks below are the profile's rules (Kubernetes "Pod Security Standards", baseline and restricted) that can
// be decided from the object alone.
import type * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_VERSION, type Project } from '@agentplane/lib/kubernetes/resources';
import { loadOperatorConfig } from '../config.js';
import { buildNamespace, buildProjectObjects, type RuntimeSecretValues } from './index.js';

const allowedVolumeSources = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret'];
const safeSysctls = new Set([
  'kernel.shm_rmid_forced',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_local_reserved_ports',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
]);

/** What Pod Security `restricted` would refuse in this Pod spec, as readable problems; empty when it is admitted. */
function restrictedViolations(pod: k8s.V1PodSpec): string[] {
  const problems: string[] = [];
  const podSecurity = pod.securityContext ?? {};
  if (pod.hostNetwork || pod.hostPID || pod.hostIPC) problems.push('host namespaces');
  if (podSecurity.windowsOptions?.hostProcess) problems.push('hostProcess');
  for (const sysctl of podSecurity.sysctls ?? []) if (!safeSysctls.has(sysctl.name)) problems.push(`unsafe sysctl ${sysctl.name}`);
  if (podSecurity.seLinuxOptions?.user || podSecurity.seLinuxOptions?.role) problems.push('SELinux user or role');
  if (podSecurity.appArmorProfile?.type === 'Unconfined') problems.push('AppArmor unconfined');
  for (const volume of pod.volumes ?? []) {
    const sources = Object.keys(volume).filter((key) => key !== 'name');
    for (const source of sources) if (!allowedVolumeSources.includes(source)) problems.push(`volume ${volume.name} uses ${source}`);
  }
  const containers = [...(pod.initContainers ?? []), ...pod.containers, ...((pod.ephemeralContainers ?? []) as k8s.V1Container[])];
  for (const container of containers) {
    const security = container.securityContext ?? {};
    const where = `container ${container.name}`;
    if (security.privileged) problems.push(`${where} is privileged`);
    if (security.windowsOptions?.hostProcess) problems.push(`${where} hostProcess`);
    if (security.procMount !== undefined && security.procMount !== 'Default') problems.push(`${where} procMount`);
    if (security.seLinuxOptions?.user || security.seLinuxOptions?.role) problems.push(`${where} SELinux user or role`);
    if (security.appArmorProfile?.type === 'Unconfined') problems.push(`${where} AppArmor unconfined`);
    for (const port of container.ports ?? []) if (port.hostPort) problems.push(`${where} hostPort ${port.hostPort}`);
    if (security.allowPrivilegeEscalation !== false) problems.push(`${where} may escalate privileges`);
    if ((security.runAsNonRoot ?? podSecurity.runAsNonRoot) !== true) problems.push(`${where} may run as root`);
    if ((security.runAsUser ?? podSecurity.runAsUser) === 0) problems.push(`${where} runs as uid 0`);
    const seccomp = (security.seccompProfile ?? podSecurity.seccompProfile)?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`${where} has no seccomp profile`);
    if (!security.capabilities?.drop?.includes('ALL')) problems.push(`${where} does not drop ALL capabilities`);
    for (const capability of security.capabilities?.add ?? []) if (capability !== 'NET_BIND_SERVICE') problems.push(`${where} adds ${capability}`);
  }
  if (podSecurity.runAsUser === 0) problems.push('pod runs as uid 0');
  return problems;
}

/** The Pod specs an object will make: its own (a Pod) or its template's (Deployments and the like). */
function podSpecsOf(object: k8s.KubernetesObject): k8s.V1PodSpec[] {
  const body = object as { spec?: { template?: { spec?: k8s.V1PodSpec }; jobTemplate?: { spec?: { template?: { spec?: k8s.V1PodSpec } } } } };
  if (object.kind === 'Pod') return [(object as k8s.V1Pod).spec!];
  return [body.spec?.template?.spec, body.spec?.jobTemplate?.spec?.template?.spec].filter((spec): spec is k8s.V1PodSpec => spec !== undefined);
}

const project: Project = {
  apiVersion: API_VERSION,
  kind: 'Project',
  metadata: { name: 'acme', uid: '0b8f2b8e-1111-4222-8333-444455556666' },
  spec: { runtime: { replicas: 3, resources: { limits: { memory: '2Gi' } } }, quota: { pods: 10 }, containerDefaults: { requests: { cpu: '100m' } } },
};
const secrets: RuntimeSecretValues = { adminKey: 'k'.repeat(40), masterKey: Buffer.alloc(32).toString('base64'), databaseUrl: 'postgres://r:p@db:5432/d', browserToken: 'b'.repeat(43) };
const config = loadOperatorConfig({ RUNTIME_REDIS_URL: 'redis://redis:6379', RUNTIME_S3_BUCKET: 'blobs', RUNTIME_S3_SECRET_ACCESS_KEY: 's', RUNTIME_BROWSER_IMAGE: 'ghcr.io/agentplane/agentplane-browser:0.1.0' });

describe('Pod Security restricted', () => {
  const objects = [buildNamespace(project, config), ...buildProjectObjects(project, config, secrets)];

  it('the namespace enforces it', () => {
    expect(objects[0]!.metadata!.labels!['pod-security.kubernetes.io/enforce']).toBe('restricted');
  });

  it.each(objects.map((object) => [`${object.kind}/${object.metadata!.name}`, object] as const))('%s makes only Pods the profile admits', (_name, object) => {
    for (const pod of podSpecsOf(object)) expect(restrictedViolations(pod)).toEqual([]);
  });

  it("builds the runtime's and the browser's Pod templates, so the check above is not vacuous", () => {
    expect(objects.flatMap(podSpecsOf)).toHaveLength(2);
  });

  it('the checker refuses what the profile refuses', () => {
    const bad: k8s.V1PodSpec = {
      hostNetwork: true,
      volumes: [{ name: 'root', hostPath: { path: '/' } }],
      containers: [{ name: 'c', securityContext: { privileged: true, runAsUser: 0, capabilities: { add: ['SYS_ADMIN'] } }, ports: [{ containerPort: 80, hostPort: 80 }] }],
    };
    expect(restrictedViolations(bad)).toEqual([
      'host namespaces',
      'volume root uses hostPath',
      'container c is privileged',
      'container c hostPort 80',
      'container c may escalate privileges',
      'container c may run as root',
      'container c runs as uid 0',
      'container c has no seccomp profile',
      'container c does not drop ALL capabilities',
      'container c adds SYS_ADMIN',
    ]);
  });
});
