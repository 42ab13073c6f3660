// The project namespace's NetworkPolicies: nothing in or out by default; the runtime answers the ingress controller,
// and the operator's namespace; every Pod but a sandbox may resolve names and reach the public internet but no
// private range, so the runtime's tasks and tools cannot reach the cluster, the node or the cloud's metadata service.
// Sandboxes get nothing at all (docs/decisions/0081): policies add up, so the allows must leave them out, since a
// deny of their own could not take back what another policy allows.
import type * as k8s from '@kubernetes/client-node';
import { LABELS, SANDBOX_COMPONENT, TASK_FIRE_COMPONENT, type Project } from '@agentplane/lib/kubernetes/resources';
import ipaddr from 'ipaddr.js';
import type { OperatorConfig } from '../config.js';
import { browserSelector } from './browser.js';
import { projectLabels, projectObjectMeta, runtimeSelector } from './metadata.js';

/**
 * IPv4 ranges no project Pod may reach: RFC 1918 private networks (pods, services, nodes, the VPC), link-local
 * (cloud metadata at 169.254.169.254), carrier-grade NAT (some clusters' pod ranges) and loopback.
 */
export const BLOCKED_IPV4_RANGES: readonly string[] = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10', '127.0.0.0/8'];

/**
 * IPv6 ranges no project Pod may reach: unique-local, link-local, loopback, and NAT64's well-known prefix, which a
 * gateway translates to IPv4 (a way around the IPv4 list otherwise). IPv4-mapped addresses need no entry: they
 * leave the Pod as IPv4 packets, which the IPv4 list covers (and the API server reads `::ffff:0:0/96` as IPv4).
 */
export const BLOCKED_IPV6_RANGES: readonly string[] = ['fc00::/7', 'fe80::/10', '::1/128', '64:ff9b::/96'];

/** The policy names, in the order they are applied: the deny comes first so no window is ever wider than desired. */
export const NETWORK_POLICY_NAMES = {
  defaultDeny: 'default-deny',
  runtimeIngress: 'allow-runtime-ingress',
  dns: 'allow-egress-dns',
  internet: 'allow-egress-internet',
  runtimeStores: 'allow-runtime-stores',
  taskFires: 'allow-task-fires',
  browserIngress: 'allow-browser-ingress',
  runtimeBrowser: 'allow-runtime-browser',
  browserDestinations: 'allow-browser-destinations',
} as const;

/** The Pods of scheduled tasks' CronJob Jobs, which call the runtime to fire their slot. */
const taskFirePods: k8s.V1LabelSelector = { matchLabels: { [LABELS.component]: TASK_FIRE_COMPONENT } };

const everyPod: k8s.V1LabelSelector = {};

/** Every Pod but the runtime's sandboxes, which run what an agent or a person typed and have no network. */
export const everyPodButSandboxes: k8s.V1LabelSelector = { matchExpressions: [{ key: LABELS.component, operator: 'NotIn', values: [SANDBOX_COMPONENT] }] };

/** Pods of one namespace, by the label the API server sets on every namespace. */
function namespaceNamed(name: string): k8s.V1NetworkPolicyPeer {
  return { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': name } } };
}

export function buildNetworkPolicies(project: Project, namespace: string, config: OperatorConfig): k8s.V1NetworkPolicy[] {
  const policy = (name: string, spec: k8s.V1NetworkPolicySpec): k8s.V1NetworkPolicy => ({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: projectObjectMeta(project, namespace, name, projectLabels(project)),
    spec,
  });
  return [
    policy(NETWORK_POLICY_NAMES.defaultDeny, { podSelector: everyPod, policyTypes: ['Ingress', 'Egress'] }),
    // Customers arrive through the ingress controller; the operator and the control-api (in the operator's
    // namespace) call the admin surface. Both reach the container port, which is what a policy sees after the Service.
    policy(NETWORK_POLICY_NAMES.runtimeIngress, {
      podSelector: { matchLabels: runtimeSelector() },
      policyTypes: ['Ingress'],
      ingress: [
        { _from: [namespaceNamed(config.ingressNamespace), namespaceNamed(config.namespace), { podSelector: taskFirePods }], ports: [{ protocol: 'TCP', port: config.runtime.port }] },
      ],
    }),
    // The cluster's DNS runs in some namespace (kube-system, usually). A node-local cache on a link-local address
    // is not a Pod in any namespace and stays unreachable; such clusters need their own allow.
    policy(NETWORK_POLICY_NAMES.dns, {
      podSelector: everyPodButSandboxes,
      policyTypes: ['Egress'],
      egress: [{ to: [{ namespaceSelector: {} }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] }],
    }),
    policy(NETWORK_POLICY_NAMES.internet, {
      podSelector: everyPodButSandboxes,
      policyTypes: ['Egress'],
      egress: [
        {
          to: [
            { ipBlock: { cidr: '0.0.0.0/0', except: [...BLOCKED_IPV4_RANGES] } },
            { ipBlock: { cidr: '::/0', except: [...BLOCKED_IPV6_RANGES] } },
          ],
        },
      ],
    }),
    // The stores (PostgreSQL, Redis, S3) the chart runs live in the operator's namespace. Stores elsewhere are
    // reachable only if they have a public address: a managed database on a private VPC address, a store in another
    // namespace, or the Kubernetes API (which the runtime uses for tasks and sandboxes, and whose endpoint the
    // operator does not know) needs an extra NetworkPolicy from the platform engineer.
    policy(NETWORK_POLICY_NAMES.runtimeStores, {
      podSelector: { matchLabels: runtimeSelector() },
      policyTypes: ['Egress'],
      egress: [{ to: [namespaceNamed(config.namespace)] }],
    }),
    // A task's Job reaches the runtime in its own namespace, and only its port (the internet rule does not cover the
    // Service's private address).
    policy(NETWORK_POLICY_NAMES.taskFires, {
      podSelector: taskFirePods,
      policyTypes: ['Egress'],
      egress: [{ to: [{ podSelector: { matchLabels: runtimeSelector() } }], ports: [{ protocol: 'TCP', port: config.runtime.port }] }],
    }),
    ...browserPolicies(config, policy),
  ];
}

/**
 * The browser's Pod (docs/decisions/0092) has the allows every Pod but a sandbox has (names, the public internet)
 * and these: only the runtime reaches its port, and the runtime may. An operator-allowed destination that is an IP
 * literal (an intranet site) gets an egress allow of its own; a name cannot be, and needs the platform engineer's.
 */
function browserPolicies(config: OperatorConfig, policy: (name: string, spec: k8s.V1NetworkPolicySpec) => k8s.V1NetworkPolicy): k8s.V1NetworkPolicy[] {
  const browser = config.runtime.browser;
  if (!browser) return [];
  const browserPods: k8s.V1LabelSelector = { matchLabels: browserSelector() };
  const port: k8s.V1NetworkPolicyPort = { protocol: 'TCP', port: browser.port };
  const literals = browser.allowedDestinations.flatMap((destination) => {
    const at = destination.lastIndexOf(':');
    const host = destination.slice(0, at).replace(/^\[|\]$/g, '');
    if (!ipaddr.isValid(host)) return [];
    const address = ipaddr.parse(host);
    return [{ to: [{ ipBlock: { cidr: `${address.toString()}/${address.kind() === 'ipv4' ? 32 : 128}` } }], ports: [{ protocol: 'TCP', port: Number(destination.slice(at + 1)) }] }];
  });
  return [
    policy(NETWORK_POLICY_NAMES.browserIngress, { podSelector: browserPods, policyTypes: ['Ingress'], ingress: [{ _from: [{ podSelector: { matchLabels: runtimeSelector() } }], ports: [port] }] }),
    policy(NETWORK_POLICY_NAMES.runtimeBrowser, { podSelector: { matchLabels: runtimeSelector() }, policyTypes: ['Egress'], egress: [{ to: [{ podSelector: browserPods }], ports: [port] }] }),
    ...(literals.length > 0 ? [policy(NETWORK_POLICY_NAMES.browserDestinations, { podSelector: browserPods, policyTypes: ['Egress'], egress: literals })] : []),
  ];
}
