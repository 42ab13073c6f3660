// How long a replica trusts a tenant stamp it cached (decision 0049): while the count of tenant changes it heard
// stands still, and on a shared store for at most a second more, so a change no notice announced (a lost message,
// a write made outside the runtime) still reaches the next request after that.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { runtimeMigrations } from '../store/migrations.js';
import type { RuntimeSchema } from '../store/schema.js';
import { TRUST_STAMP_MS } from './change-notices.js';
import { configurationDigestKey, TenantConfigurationService } from './configuration.js';

describe('a cached tenant stamp', () => {
  let database: Database<RuntimeSchema>;
  const tenantId = randomUUID();
  const masterKey = randomBytes(32);

  beforeAll(async () => {
    database = await openDatabase<RuntimeSchema>({ driver: 'pglite' });
    await migrate(database.db, runtimeMigrations);
    await database.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'stamps', settings_json: '{}', webhook_secret: 'whs_test' }).execute();
    await database.db.insertInto('tenant_configurations').values({ tenant_id: tenantId, version: 1, digest: 'd1', document: '{}' }).execute();
  }, 60_000);
  afterAll(async () => {
    await database?.close();
  });

  /** A write no notice announces: what another program, or a lost message, leaves behind. */
  const unannounced = (version: number) =>
    database.db.updateTable('tenant_configurations').set({ version, digest: `d${version}` }).where('tenant_id', '=', tenantId).execute();

  it('is trusted while no change is heard, for at most a second on a shared store, and read again after', async () => {
    let heard = 0;
    let clock = 1_000_000;
    const service = new TenantConfigurationService(database.db, new SecretBox(masterKey), configurationDigestKey(masterKey), () => heard, TRUST_STAMP_MS, () => clock);
    await unannounced(1);
    expect((await service.stamp(tenantId))?.version).toBe(1);
    const before = database.statements();
    await unannounced(2);
    clock += TRUST_STAMP_MS - 1;
    expect((await service.stamp(tenantId))?.version).toBe(1);
    clock += 1;
    expect((await service.stamp(tenantId))?.version).toBe(2);
    // A notice makes it read again at once.
    await unannounced(3);
    heard += 1;
    expect((await service.stamp(tenantId))?.version).toBe(3);
    // The two writes, and one read of the stamp each time it could have changed; none while it was trusted.
    expect(database.statements() - before).toBe(2 + 2);
  });

  it('is trusted with no time limit on a store only this process writes, and read again after each of its writes', async () => {
    let clock = 1_000_000;
    const service = new TenantConfigurationService(database.db, new SecretBox(masterKey), configurationDigestKey(masterKey), database.changesTo(['tenants', 'tenant_configurations']), undefined, () => clock);
    await unannounced(4);
    expect((await service.stamp(tenantId))?.version).toBe(4);
    clock += 60 * TRUST_STAMP_MS;
    const before = database.statements();
    expect((await service.stamp(tenantId))?.version).toBe(4);
    expect(database.statements()).toBe(before);
    await unannounced(5);
    expect((await service.stamp(tenantId))?.version).toBe(5);
  });
});
