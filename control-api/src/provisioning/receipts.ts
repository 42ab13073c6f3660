// Read-your-writes across the two planes (docs/decisions/0070): a control-plane write that changes what a project's
// runtime does answers once the runtime holds the change, within a bounded wait, and its answer says which
// configuration version it made and whether the runtime has it (`applied`) or it is still on its way (`pending`).
// A service reports its change here; the routes that write carry the receipt onto their answer as headers, so no
// service touches HTTP and no write route can forget it.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { RouteDefinition } from '@agentplane/lib/http/routes';
import type { OutboxRelay } from './outbox.js';

/** What a write's answer says of the configuration it changed. */
export interface ConfigurationReceipt {
  projectId: string;
  /** The configuration version the write made (a token minted from now on carries at least this one). */
  version: number;
  /** The runtime holds it: every data-plane request sent from now on sees it. */
  applied: boolean;
}

export const CONFIGURATION_VERSION_HEADER = 'X-Configuration-Version';
export const CONFIGURATION_STATE_HEADER = 'X-Configuration-State';

export class ConfigurationDelivery {
  private readonly requests = new AsyncLocalStorage<{ receipt?: ConfigurationReceipt }>();

  constructor(
    /** The relay that delivers; absent while no runtime is configured (the change then stays pending). */
    private readonly relay: () => OutboxRelay | undefined,
    /** The longest a write waits for its runtime before answering `pending`; 0 answers at once. */
    private readonly waitMs: number,
  ) {}

  /**
   * Called by a service once its change committed with the outbox entry that carries it: waits until the runtime
   * holds it (or `waitMs` passed) and records the receipt for the write's answer. Never rejects: the change is
   * stored and queued whatever the runtime does.
   */
  async settle(projectId: string, throughEntryId: number, version: number): Promise<ConfigurationReceipt> {
    const relay = this.relay();
    let applied = false;
    if (relay && this.waitMs === 0) relay.kick();
    else if (relay) applied = await relay.awaitDelivered(projectId, throughEntryId, this.waitMs);
    const receipt = { projectId, version, applied };
    const request = this.requests.getStore();
    // A request that changes one project's configuration twice reports the later change.
    if (request && (!request.receipt || request.receipt.version <= version)) request.receipt = receipt;
    return receipt;
  }

  /**
   * The routes with their writes' answers carrying the receipt of the configuration change they made, if any.
   * Reads are left as they are.
   */
  carryReceipts(routes: RouteDefinition[]): RouteDefinition[] {
    return routes.map((route) =>
      route.method === 'get'
        ? route
        : {
            ...route,
            handle: async (input) => {
              const request: { receipt?: ConfigurationReceipt } = {};
              const result = await this.requests.run(request, () => route.handle(input));
              if (!request.receipt || result === 'handled') return result;
              return { ...result, headers: { ...result.headers, ...receiptHeaders(request.receipt) } };
            },
          },
    );
  }
}

export function receiptHeaders(receipt: ConfigurationReceipt): Record<string, string> {
  return {
    [CONFIGURATION_VERSION_HEADER]: String(receipt.version),
    [CONFIGURATION_STATE_HEADER]: receipt.applied ? 'applied' : 'pending',
  };
}
