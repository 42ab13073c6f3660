// The sandbox host this runtime uses, as its configuration says (docs/decisions/0079, 0081).
import { existsSync } from 'node:fs';
import type { Logger } from '@agentplane/lib/logging';
import type { RuntimeConfig } from '../config.js';
import type { SandboxHost } from './host.js';
import { LocalSandboxHost } from './local/host.js';

export async function createSandboxHost(options: {
  kind: RuntimeConfig['computerHost'];
  kubernetes: RuntimeConfig['computerKubernetes'];
  root: string;
  hostUid: number;
  hostUidCount: number;
  pool: number;
  logger: Logger;
}): Promise<SandboxHost | undefined> {
  if (options.kind === 'none') return undefined;
  if (options.kind === 'kubernetes') {
    // Loaded only where sandboxes are Pods: the embedded default starts without client-node.
    const [k8s, { withCallDeadline }, { KubernetesSandboxHost }] = await Promise.all([
      import('@kubernetes/client-node'),
      import('@agentplane/lib/kubernetes/kube-config'),
      import('./kubernetes/host.js'),
    ]);
    const settings = options.kubernetes!;
    const kubeConfig = new k8s.KubeConfig();
    if (settings.kubeconfig) kubeConfig.loadFromFile(settings.kubeconfig);
    else kubeConfig.loadFromDefault();
    return new KubernetesSandboxHost({
      kubeConfig: withCallDeadline(kubeConfig),
      namespace: settings.namespace,
      defaultImage: settings.image,
      imagePullPolicy: settings.imagePullPolicy,
      ...(settings.storageClass ? { storageClass: settings.storageClass } : {}),
      networkPolicy: settings.networkPolicy,
      logger: options.logger,
    });
  }
  if (options.kind === 'auto' && !existsSync('/usr/bin/bwrap')) {
    options.logger.info('no sandbox host: bubblewrap is not installed (apt-get install bubblewrap), so the computer capability is not offered');
    return undefined;
  }
  return LocalSandboxHost.create({ root: options.root, logger: options.logger, hostUid: options.hostUid, hostUidCount: options.hostUidCount, pool: options.pool });
}
