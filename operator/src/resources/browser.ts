// The project's browser (docs/decisions/0092): a Deployment running the browser server (Chromium behind Playwright's
// browser server and the egress guard) and its Service, so that pages, a stranger's code, never run in the runtime's
// Pod. Its Pod meets Pod Security `restricted`, has no ServiceAccount token, a read-only root, and memory-backed
// /dev/shm (Chromium's shared memory; the container runtime's 64 MiB default is too small for large pages). The
// runtime connects with the token kept in the runtime Secret; the NetworkPolicies (network.ts) let only the
// runtime in and the public internet out.
import type * as k8s from '@kubernetes/client-node';
import type { Project } from '@agentplane/lib/kubernetes/resources';
import { LABELS } from '@agentplane/lib/kubernetes/resources';
import type { BrowserPodSettings, OperatorConfig } from '../config.js';
import { specHash } from './hash.js';
import { projectLabels, projectObjectMeta } from './metadata.js';
import { BROWSER_NAME, BROWSER_PORT_NAME, RUNTIME_SECRET_NAME } from './names.js';
import { RUNTIME_SECRET_KEYS, type RuntimeSecretValues } from './secret.js';

/** The component label of the browser's Pods and objects. */
export const BROWSER_COMPONENT = 'browser';

/** The browser image's own user (the Dockerfile's browser stage); stated so the kubelet can verify it is not root. */
export const BROWSER_USER_ID = 10001;

/** Pod-template annotation carrying a hash of the token: a new token rolls the browser with the runtime. */
const TOKEN_HASH_ANNOTATION = 'agentplane.io/browser-token-hash';

/** What selects the browser's Pods: labels that never change, as a Deployment's selector is immutable. */
export function browserSelector(): Record<string, string> {
  return { [LABELS.name]: BROWSER_NAME, [LABELS.component]: BROWSER_COMPONENT };
}

function browserLabels(project: Project): Record<string, string> {
  return { ...projectLabels(project, BROWSER_COMPONENT), ...browserSelector() };
}

/** Where the runtime reaches the browser server: the Service, in its own namespace. */
export function browserEndpoint(settings: BrowserPodSettings): string {
  return `ws://${BROWSER_NAME}:${settings.port}`;
}

export function buildBrowserObjects(project: Project, namespace: string, config: OperatorConfig, secrets: RuntimeSecretValues): k8s.KubernetesObject[] {
  const settings = config.runtime.browser;
  if (!settings || secrets.browserToken === undefined) return [];
  return [buildBrowserDeployment(project, namespace, settings, secrets.browserToken), buildBrowserService(project, namespace, settings)];
}

function buildBrowserDeployment(project: Project, namespace: string, settings: BrowserPodSettings, token: string): k8s.V1Deployment {
  const tcp: k8s.V1TCPSocketAction = { port: BROWSER_PORT_NAME };
  // With a profile that allows them, Chromium's own sandbox is required, not tried: a Pod that cannot have it fails
  // to start rather than run without it unnoticed. Pod Security `restricted` admits Localhost profiles.
  const seccompProfile: k8s.V1SeccompProfile = settings.seccompProfile ? { type: 'Localhost', localhostProfile: settings.seccompProfile } : { type: 'RuntimeDefault' };
  const container: k8s.V1Container = {
    name: BROWSER_NAME,
    image: settings.image,
    imagePullPolicy: settings.imagePullPolicy,
    args: ['browser'],
    ports: [{ name: BROWSER_PORT_NAME, containerPort: settings.port, protocol: 'TCP' }],
    env: [
      { name: 'HOST', value: '0.0.0.0' },
      { name: 'BROWSER_SERVER_PORT', value: String(settings.port) },
      { name: 'LOG_FORMAT', value: 'json' },
      { name: 'BROWSER_SANDBOX', value: settings.seccompProfile ? 'true' : 'auto' },
      { name: 'BROWSER_TOKEN', valueFrom: { secretKeyRef: { name: RUNTIME_SECRET_NAME, key: RUNTIME_SECRET_KEYS.browserToken } } },
      ...(settings.allowedDestinations.length > 0 ? [{ name: 'BROWSER_ALLOWED_DESTINATIONS', value: settings.allowedDestinations.join(',') }] : []),
    ],
    resources: settings.resources,
    startupProbe: { tcpSocket: tcp, periodSeconds: 1, failureThreshold: 60 },
    livenessProbe: { tcpSocket: tcp, periodSeconds: 10, timeoutSeconds: 3, failureThreshold: 3 },
    readinessProbe: { tcpSocket: tcp, periodSeconds: 5, timeoutSeconds: 3 },
    securityContext: {
      runAsNonRoot: true,
      runAsUser: BROWSER_USER_ID,
      runAsGroup: BROWSER_USER_ID,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile,
    },
    volumeMounts: [
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'shm', mountPath: '/dev/shm' },
    ],
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: projectObjectMeta(project, namespace, BROWSER_NAME, browserLabels(project)),
    spec: {
      replicas: 1,
      revisionHistoryLimit: 3,
      selector: { matchLabels: browserSelector() },
      // Contexts live in the browser's memory: a rollout ends them either way, and two browsers at once would
      // double the namespace's memory for nothing.
      strategy: { type: 'Recreate' },
      template: {
        metadata: { labels: browserLabels(project), annotations: { [TOKEN_HASH_ANNOTATION]: specHash({ token }) } },
        spec: {
          // Pages never speak to the API server: no ServiceAccount token in the Pod.
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 15,
          securityContext: { runAsNonRoot: true, runAsUser: BROWSER_USER_ID, runAsGroup: BROWSER_USER_ID, fsGroup: BROWSER_USER_ID, seccompProfile },
          containers: [container],
          volumes: [
            { name: 'tmp', emptyDir: { sizeLimit: '1Gi' } },
            { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '512Mi' } },
          ],
        },
      },
    },
  };
}

function buildBrowserService(project: Project, namespace: string, settings: BrowserPodSettings): k8s.V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: projectObjectMeta(project, namespace, BROWSER_NAME, browserLabels(project)),
    spec: {
      type: 'ClusterIP',
      selector: browserSelector(),
      ports: [{ name: BROWSER_PORT_NAME, port: settings.port, targetPort: BROWSER_PORT_NAME, protocol: 'TCP' }],
    },
  };
}
