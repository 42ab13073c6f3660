// The notice a replica sends when a tenant's skills change (decision 0056): the other replicas drop their kept list
// when they hear it, and one that could not be sent is logged, since their lists then stay stale until they expire.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { AppError } from '@agentplane/lib/errors';
import type { PubSub } from '@agentplane/lib/events/port';
import { captureLogs } from '@agentplane/test/harness/logs';
import { runtimeMigrations } from '../store/migrations.js';
import type { RuntimeSchema } from '../store/schema.js';
import { SkillService } from './service.js';

const skill = (name: string) => ({ file: { filename: 'SKILL.md', bytes: Buffer.from(`---\nname: ${name}\ndescription: Says ${name}.\n---\nSay ${name}.\n`) } });

describe("a tenant's skills changing", () => {
  let database: Database<RuntimeSchema>;
  const tenantId = randomUUID();

  beforeAll(async () => {
    database = await openDatabase<RuntimeSchema>({ driver: 'pglite' });
    await migrate(database.db, runtimeMigrations);
    await database.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'skills', settings_json: '{}', webhook_secret: 'whs_test' }).execute();
  }, 60_000);
  afterAll(async () => {
    await database?.close();
  });

  it('is announced to the other replicas, and an announcement that fails is logged, not thrown', async () => {
    const sent: unknown[] = [];
    let refuse = false;
    const pubsub: PubSub = {
      publish: async (_channel, message) => {
        if (refuse) throw new AppError('unavailable', 'the event bus is unreachable');
        sent.push(message);
      },
      subscribe: async () => async () => undefined,
    };
    const logs = captureLogs('warn');
    const skills = new SkillService(database.db, new SecretBox(randomBytes(32)), { allowPrivate: false, allowHttp: false }, Date.now, pubsub, logs.logger);

    await skills.uploadProject(tenantId, skill('hello'));
    expect(sent).toEqual([{ tenant_id: tenantId }]);
    expect(logs.text()).toBe('');

    refuse = true;
    const published = await skills.uploadProject(tenantId, skill('goodbye'));
    expect(published).toMatchObject({ name: 'goodbye' });
    expect(logs.text()).toContain("could not tell the other replicas a tenant's skills changed");
    expect(logs.text()).toContain(tenantId);
  });
});
