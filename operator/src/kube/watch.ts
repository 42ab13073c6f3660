// Keeps one kind of object watched: client-node's informer lists, then watches from that list's resourceVersion
// (relisting by itself after 410 Gone); when the watch fails otherwise it stops, so this restarts it with a growing
// delay. `synced` says the first list has arrived and the watch is running: the operator's readiness.
//
// Objects are cached without `metadata.managedFields`: the operator writes by server-side apply and never reads
// them, and for an applied object they are about as large as the rest of it (every field it sets, named again), so
// at a thousand Projects they were much of the operator's heap (docs/benchmarks.md).
import * as k8s from '@kubernetes/client-node';
import { errorMessage } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';

export interface WatchSpec<T extends k8s.KubernetesObject> {
  /** For logs: `projects`, `tenants`, `deployments`. */
  name: string;
  /** The collection's API path, without query: `/apis/agentplane.io/v1alpha1/projects`. */
  path: string;
  list: () => Promise<k8s.KubernetesListObject<T>>;
  labelSelector?: string;
  /** An object was added, changed or deleted (deletions included: a reconciler must see the object gone). */
  onChange: (object: T, event: 'add' | 'update' | 'delete') => void;
}

export class ObjectWatch<T extends k8s.KubernetesObject> {
  private readonly informer: k8s.Informer<T> & k8s.ObjectCache<T>;
  private stopped = true;
  private failures = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  synced = false;

  constructor(
    kubeConfig: k8s.KubeConfig,
    private readonly spec: WatchSpec<T>,
    private readonly logger: Logger,
  ) {
    const list = async () => {
      const listed = await spec.list();
      for (const object of listed.items) withoutManagedFields(object);
      return listed;
    };
    this.informer = k8s.makeInformer(kubeConfig, spec.path, list, spec.labelSelector);
    // The cache holds the very object a watch event hands these listeners (registered first, so before any other):
    // trimmed here, it is trimmed there.
    this.informer.on('add', (object) => spec.onChange(withoutManagedFields(object), 'add'));
    this.informer.on('update', (object) => spec.onChange(withoutManagedFields(object), 'update'));
    this.informer.on('delete', (object) => spec.onChange(object, 'delete'));
    this.informer.on('error', (error) => this.failed(error));
  }

  /** Starts listing and watching; resolves once the first attempt has listed (or failed and scheduled a retry). */
  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.synced = false;
    clearTimeout(this.restartTimer);
    await this.informer.stop();
  }

  /** What the watch has seen, from its cache. */
  list(namespace?: string): ReadonlyArray<T> {
    return this.informer.list(namespace);
  }

  /** One object as the watch last saw it, from its cache. */
  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  private async connect(): Promise<void> {
    const failuresBefore = this.failures;
    await this.informer.start();
    // The informer reports a failed list through 'error' and still resolves start().
    if (!this.stopped && this.failures === failuresBefore) {
      this.synced = true;
      this.failures = 0;
    }
  }

  private failed(error: unknown): void {
    // Stopping aborts the watch request, which the informer reports as an error.
    if (this.stopped) return;
    this.synced = false;
    this.failures += 1;
    const delayMs = Math.min(30_000, 500 * 2 ** Math.min(this.failures - 1, 6));
    this.logger.warn({ watch: this.spec.name, err: errorMessage(error), retryInMs: delayMs }, 'watch failed; restarting');
    clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => {
      if (!this.stopped) void this.connect().catch((failure: unknown) => this.failed(failure));
    }, delayMs);
  }
}

/** Drops the object's field ownership records (see the head of this file); answers the object. */
export function withoutManagedFields<T extends k8s.KubernetesObject>(object: T): T {
  if (object.metadata?.managedFields !== undefined) delete object.metadata.managedFields;
  return object;
}
