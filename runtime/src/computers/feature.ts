// What sandboxes bring to the composition root (docs/decisions/0079): their part of the tenant erase (every sandbox
// removed before any row goes, what could not be named), of a forget (the subject's sandboxes), the sweep that
// pauses idle sandboxes and stops those past their lifetime, and the host's shutdown.
import { computerSettingsOf } from '@agentplane/lib/computer';
import type { Logger } from '@agentplane/lib/logging';
import type { FeatureHost } from '../features.js';
import type { TenantConfigurationService } from '../tenants/configuration.js';
import type { ComputerService } from './service.js';

export async function registerComputers(
  host: FeatureHost,
  deps: {
    computers: ComputerService;
    configurations: Pick<TenantConfigurationService, 'load'>;
    logger: Logger;
    sweepMs: number;
    /** The store is this process's alone: sandboxes an earlier life held lost their processes with it. */
    storeIsExclusive: boolean;
  },
): Promise<void> {
  const { computers, logger } = deps;
  if (deps.storeIsExclusive) {
    const stopped = await computers.settleAfterRestart();
    if (stopped > 0) logger.info({ sandboxes: stopped }, 'sandboxes an earlier start held are stopped; their /workspace is kept, and resume starts them again');
  }
  const removeAll = async (tenantId: string, subject?: string) => {
    const { items, failed } = await computers.removeAll(tenantId, subject);
    if (failed.length > 0) throw new Error(`${failed.length} sandbox(es) could not be removed: ${failed.join('; ')}`);
    return { items };
  };
  host.eraseStep({ name: 'sandboxes', phase: 'sandboxes', run: (tenantId) => removeAll(tenantId) });
  host.eraseRows({ table: 'sandboxes', purge: async (trx, tenantId) => Number((await trx.deleteFrom('sandboxes').where('tenant_id', '=', tenantId).executeTakeFirst()).numDeletedRows) });
  host.forgetStep({ name: 'sandboxes', run: (tenantId, subject) => removeAll(tenantId, subject) });
  host.forgetRows({
    table: 'sandboxes',
    purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('sandboxes').where('tenant_id', '=', tenantId).where('owner', '=', subject).executeTakeFirst()).numDeletedRows),
  });
  if (computers.host) {
    const sandboxHost = computers.host;
    host.every('sandbox sweep', deps.sweepMs, () => computers.sweep(async (tenantId) => computerSettingsOf((await deps.configurations.load(tenantId))?.document.computer)));
    host.onShutdown(() => sandboxHost.close());
  }
}
