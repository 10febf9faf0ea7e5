export * from './fallback';
export * from './http';
export * from './memory';
export * from './redis';
export * from './types';

import { createMemoryStores } from './memory';
import { createRedisStores } from './redis';
import type { Stores } from './types';

/** Redis when a URL is given (production, shared by replicas), else in-process (standalone). */
export function createStores(redisUrl: string | undefined, prefix?: string): Stores {
  return redisUrl ? createRedisStores(redisUrl, { prefix }) : createMemoryStores();
}
