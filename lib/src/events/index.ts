// Builds the event bus a program's config asks for: in-process by default, Redis when runtime processes share
// run logs, pub/sub and rate counters.
import type { Logger } from '../logging.js';
import { createMemoryEventBus } from './memory.js';
import type { EventBus, RetentionOptions } from './port.js';
import { createRedisEventBus, type RedisEventBusOptions } from './redis.js';

export type EventBusConfig = RetentionOptions &
  (
    | { kind: 'memory' }
    | ({ kind: 'redis' } & Pick<
        RedisEventBusOptions,
        'url' | 'keyPrefix' | 'connectTimeoutMs' | 'commandTimeoutMs' | 'pingTimeoutMs'
      >)
  );

/** Never waits for the backend: a Redis that is down shows in `ping()` (readiness), not as a failed start. */
export function createEventBus(config: EventBusConfig, deps: { logger?: Logger } = {}): EventBus {
  return config.kind === 'redis'
    ? createRedisEventBus({ ...config, ...deps })
    : createMemoryEventBus({ ...config, ...deps });
}

export type * from './port.js';
export { createMemoryEventBus, type MemoryEventBusOptions } from './memory.js';
export { createRedisEventBus, type RedisEventBusOptions } from './redis.js';
