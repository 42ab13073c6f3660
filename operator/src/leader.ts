// Leader election on a coordination.k8s.io/v1 Lease, the protocol client-go uses: a candidate takes the Lease when
// it is absent, released, or unchanged for its whole duration as seen on the candidate's own clock; the leader
// renews it every renewSeconds. Every take and renewal is a replace at the resourceVersion just read, so of two
// candidates exactly one wins. A leader whose renewals keep failing stops leading after two thirds of the lease,
// before any other replica may take it; on shutdown it releases the Lease so a standby takes over at once.
import * as k8s from '@kubernetes/client-node';
import { errorMessage } from '@agentplane/lib/errors';
import type { Logger } from '@agentplane/lib/logging';
import { isConflict, isNotFound, toKubeError, type KubeClient } from './kube/client.js';

export interface LeaderElectorOptions {
  kube: KubeClient;
  namespace: string;
  leaseName: string;
  identity: string;
  leaseSeconds: number;
  renewSeconds: number;
  logger: Logger;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

export class LeaderElector {
  private leading = false;
  /** performance.now() when the last successful renewal was sent: leadership is valid for renewDeadlineMs after. */
  private renewedAt = 0;
  /** The other holder's record as last seen, and when (our clock) it last changed. */
  private observed: { resourceVersion: string; at: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Fires when leadership runs out without a renewal, even while a renewal request hangs. */
  private deadline: NodeJS.Timeout | undefined;
  private running = false;
  private tick: Promise<void> = Promise.resolve();

  constructor(private readonly options: LeaderElectorOptions) {}

  private get renewDeadlineMs(): number {
    return (this.options.leaseSeconds * 1000 * 2) / 3;
  }

  /** True while this replica holds a Lease it renewed recently enough that no other replica can hold it. */
  isLeader(): boolean {
    return this.leading && performance.now() - this.renewedAt < this.renewDeadlineMs;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops campaigning; a leader gives the Lease up so a standby need not wait for it to expire. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.tick;
    if (!this.leading) return;
    this.lose('shutting down');
    await this.release();
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.tick = this.campaign().finally(() => this.schedule(this.options.renewSeconds * 1000));
    }, delayMs);
  }

  private async campaign(): Promise<void> {
    const attemptAt = performance.now();
    try {
      // A request that hangs (a partition that drops packets) must not stall the campaign.
      const held = await Promise.race([
        this.acquireOrRenew(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the API server did not answer in time')), this.renewDeadlineMs).unref()),
      ]);
      if (held) {
        this.renewedAt = attemptAt;
        clearTimeout(this.deadline);
        this.deadline = setTimeout(() => this.lose('could not renew the lease in time'), this.renewDeadlineMs - (performance.now() - attemptAt));
        if (!this.leading) {
          this.leading = true;
          this.options.logger.info({ lease: this.options.leaseName, identity: this.options.identity }, 'became the leader');
          this.options.onStartedLeading();
        }
      } else if (this.leading) {
        this.lose('another replica holds the lease');
      }
    } catch (error) {
      this.options.logger.warn({ err: errorMessage(error), lease: this.options.leaseName }, 'leader election: could not reach the lease');
    }
    if (this.leading && !this.isLeader()) this.lose('could not renew the lease in time');
  }

  private lose(why: string): void {
    clearTimeout(this.deadline);
    if (!this.leading) return;
    this.leading = false;
    this.options.logger.warn({ lease: this.options.leaseName, identity: this.options.identity, why }, 'stopped leading');
    this.options.onStoppedLeading();
  }

  /** One round: true when we hold the Lease afterwards. */
  private async acquireOrRenew(): Promise<boolean> {
    const { kube, namespace, leaseName: name, identity, leaseSeconds } = this.options;
    const now = new k8s.V1MicroTime();
    let lease: k8s.V1Lease;
    try {
      lease = await kube.coordination.readNamespacedLease({ name, namespace });
    } catch (error) {
      if (!isNotFound(toKubeError(error, `reading lease ${namespace}/${name}`))) throw toKubeError(error, `reading lease ${namespace}/${name}`);
      const body: k8s.V1Lease = {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name, namespace },
        spec: { holderIdentity: identity, leaseDurationSeconds: leaseSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      };
      return this.attempt(() => kube.coordination.createNamespacedLease({ namespace, body }), 'creating');
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    if (holder !== identity && holder !== '') {
      // Someone else's: it is theirs until it stays unchanged for its whole duration, measured on our clock.
      const resourceVersion = lease.metadata?.resourceVersion ?? '';
      if (this.observed?.resourceVersion !== resourceVersion) this.observed = { resourceVersion, at: performance.now() };
      const durationMs = (spec.leaseDurationSeconds ?? leaseSeconds) * 1000;
      if (this.leading || performance.now() < this.observed.at + durationMs) return false;
    }
    const taking = holder !== identity;
    const body: k8s.V1Lease = {
      ...lease,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: leaseSeconds,
        acquireTime: taking ? now : spec.acquireTime,
        renewTime: now,
        leaseTransitions: (spec.leaseTransitions ?? 0) + (taking && holder !== '' ? 1 : 0),
      },
    };
    return this.attempt(() => kube.coordination.replaceNamespacedLease({ name, namespace, body }), taking ? 'taking' : 'renewing');
  }

  /** A write at the read resourceVersion: a 409 means another replica got there first. */
  private async attempt(write: () => Promise<unknown>, what: string): Promise<boolean> {
    try {
      await write();
      return true;
    } catch (error) {
      const failure = toKubeError(error, `${what} lease ${this.options.namespace}/${this.options.leaseName}`);
      if (isConflict(failure)) return false;
      throw failure;
    }
  }

  private async release(): Promise<void> {
    const { kube, namespace, leaseName: name, identity } = this.options;
    try {
      const lease = await kube.coordination.readNamespacedLease({ name, namespace });
      if (lease.spec?.holderIdentity !== identity) return;
      const now = new k8s.V1MicroTime();
      await kube.coordination.replaceNamespacedLease({
        name,
        namespace,
        body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, acquireTime: now, renewTime: now } },
      });
      this.options.logger.info({ lease: name, identity }, 'released the lease');
    } catch (error) {
      // It expires on its own; the standby just waits longer.
      this.options.logger.warn({ err: toKubeError(error, 'releasing the lease') }, 'could not release the lease');
    }
  }
}
