// Builds the event bus a program's config asks for: in-process by default, Redis when runtime processes share
// run logs, pub/sub and rate counters. The Redis adapter is imported only when chosen: node-redis costs a process
// that does not use it tens of MiB and a tenth of a second at start (docs/decisions/0033).
import type { Logger } from '../logging.js';
import { createMemoryEventBus, type MemoryEventBusOptions } from './memory.js';
import type { EventBus, RetentionOptions } from './port.js';
import type { RedisEventBusOptions } from './redis.js';

export type EventBusConfig = RetentionOptions &
  (
    | ({ kind: 'memory' } & Pick<MemoryEventBusOptions, 'maxHeldBytes'>)
    | ({ kind: 'redis' } & Pick<
        RedisEventBusOptions,
        'url' | 'keyPrefix' | 'connectTimeoutMs' | 'commandTimeoutMs' | 'pingTimeoutMs'
      >)
  );

/**
 * Waits only for the adapter's module, never for the backend: a Redis that is down shows in `ping()` (readiness),
 * not as a failed start.
 */
export async function createEventBus(config: EventBusConfig, deps: { logger?: Logger } = {}): Promise<EventBus> {
  if (config.kind === 'memory') return createMemoryEventBus({ ...config, ...deps });
  const { createRedisEventBus } = await import('./redis.js');
  return createRedisEventBus({ ...config, ...deps });
}

export type * from './port.js';
export type { RedisEventBusOptions } from './redis.js';
export { createMemoryEventBus, type MemoryEventBusOptions } from './memory.js';
