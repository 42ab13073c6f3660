// The notice a replica sends when a tenant's skills change (decision 0056), over a real redis-server: another
// replica hears it, and one that could not be sent (Redis gone) is logged, since the other replicas' lists then stay
// stale until they expire, and the change itself still stands.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { createRedisEventBus } from '@agentplane/lib/events/redis';
import type { EventBus } from '@agentplane/lib/events/port';
import { eventually } from '@agentplane/test/harness/eventually';
import { captureLogs } from '@agentplane/test/harness/logs';
import { redisServerBinary, startRedis, type RedisServer } from '@agentplane/test/harness/redis';
import { runtimeMigrations } from '../store/migrations.js';
import type { RuntimeSchema } from '../store/schema.js';
import { PLUGIN_CHANGES_CHANNEL, SkillService } from './service.js';

const skill = (name: string) => ({ file: { filename: 'SKILL.md', bytes: Buffer.from(`---\nname: ${name}\ndescription: Says ${name}.\n---\nSay ${name}.\n`) } });
const redisBinary = redisServerBinary();

describe.skipIf(!redisBinary)("a tenant's skills changing, on replicas sharing Redis", () => {
  let database: Database<RuntimeSchema>;
  let redis: RedisServer;
  const buses: EventBus[] = [];
  const tenantId = randomUUID();

  beforeAll(async () => {
    database = await openDatabase<RuntimeSchema>({ driver: 'pglite' });
    await migrate(database.db, runtimeMigrations);
    await database.db.insertInto('tenants').values({ tenant_id: tenantId, name: 'skills', settings_json: '{}', webhook_secret: 'whs_test' }).execute();
    redis = await startRedis(redisBinary!);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(buses.map((bus) => bus.close()));
    await redis?.stop();
    await database?.close();
  });

  it('is heard by another replica, and an announcement Redis cannot take is logged while the change stands', async () => {
    const bus = () => {
      const opened = createRedisEventBus({ url: redis.url, keyPrefix: 'agentplane:skills-test:', commandTimeoutMs: 500 });
      buses.push(opened);
      return opened;
    };
    const logs = captureLogs('warn');
    const here = new SkillService(database.db, new SecretBox(randomBytes(32)), { allowPrivate: false, allowHttp: false }, Date.now, bus().pubsub, logs.logger);
    const heard: unknown[] = [];
    const stopListening = await bus().pubsub.subscribe(PLUGIN_CHANGES_CHANNEL, (message) => heard.push(message));

    await here.uploadProject(tenantId, skill('hello'));
    await eventually(() => heard.length === 1, { what: 'the other replica to hear the change' });
    expect(heard).toEqual([{ tenant_id: tenantId }]);
    expect(logs.text()).toBe('');
    await stopListening();

    await redis.stop();
    const published = await here.uploadProject(tenantId, skill('goodbye'));
    expect(published).toMatchObject({ name: 'goodbye' });
    expect((await here.listAll(tenantId)).map((plugin) => plugin.name).sort()).toEqual(['goodbye', 'hello']);
    expect(logs.text()).toContain("could not tell the other replicas a tenant's skills changed");
    expect(logs.text()).toContain(tenantId);
  });
});
