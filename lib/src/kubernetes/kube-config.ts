// The KubeConfig every program talks to the Kubernetes API through (the operator, and the control-api's kubernetes
// provisioner): client-node's, with a deadline on every API call and connections kept alive and shared.
import https from 'node:https';
import * as k8s from '@kubernetes/client-node';

/** How long one API call may take: a request the API server never answers fails the reconcile, which retries. */
export const API_CALL_TIMEOUT_MS = 30_000;

/** TLS options of an agent that decide whether two agents may share connections. */
const AGENT_IDENTITY = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'servername', 'rejectUnauthorized'] as const;

/**
 * A KubeConfig whose API calls carry a deadline and share kept-alive connections. client-node makes a new agent for
 * every call, so every call paid a TCP and TLS handshake with the API server (and the TLS buffers of thousands of
 * short connections); here each call gets one agent, kept alive, per set of TLS options (a rotated client
 * certificate gets a new one). Watches keep their own deadline.
 */
class DeadlineKubeConfig extends k8s.KubeConfig {
  private shared: { identity: unknown[]; agent: https.Agent } | undefined;

  constructor(private readonly timeoutMs: number) {
    super();
  }

  override async applySecurityAuthentication(context: k8s.RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    if (!context.getSignal()) context.setSignal(AbortSignal.timeout(this.timeoutMs));
    const fresh = context.getAgent();
    if (fresh instanceof https.Agent) context.setAgent(this.keptAlive(fresh));
  }

  private keptAlive(fresh: https.Agent): https.Agent {
    const options = (fresh as https.Agent & { options: Record<string, unknown> }).options;
    // client-node reads the certificate files again for every call: compared by content, not by reference.
    const identity = AGENT_IDENTITY.map((name) => (Buffer.isBuffer(options[name]) ? (options[name] as Buffer).toString('base64') : options[name]));
    if (!this.shared || identity.some((value, i) => value !== this.shared!.identity[i])) {
      // The agent of the old credentials is left to finish its calls; its idle connections close at the server's timeout.
      this.shared = { identity, agent: new https.Agent({ ...options, keepAlive: true, maxFreeSockets: 16, scheduling: 'lifo' }) };
    }
    return this.shared.agent;
  }
}

/**
 * The same clusters, users and contexts, with a deadline on every API call. Without one, a request to an API server
 * that stops answering (a network partition that drops packets) would hold its work-queue slot for good.
 */
export function withCallDeadline(source: k8s.KubeConfig, timeoutMs = API_CALL_TIMEOUT_MS): k8s.KubeConfig {
  const timed = new DeadlineKubeConfig(timeoutMs);
  timed.loadFromOptions({ clusters: source.clusters, users: source.users, contexts: source.contexts, currentContext: source.currentContext });
  return timed;
}
