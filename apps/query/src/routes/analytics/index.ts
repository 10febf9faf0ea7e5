import type { HttpEnv } from '@trackhouse/core';
import type { Hono } from 'hono';
import type { QueryContext } from '../../context';
import { exportRoutes } from './export';
import { funnelRoutes } from './funnels';
import { journeyRoutes } from './journeys';
import { liveRoutes } from './live';
import { metricRoutes } from './metric';
import { overviewRoutes } from './overview';
import { retentionRoutes } from './retention';
import { sessionRoutes } from './sessions';
import { userRoutes } from './users';

/** SPEC 13's traffic analytics, one router per resource. */
export const analyticsRoutes: ((ctx: QueryContext) => Hono<HttpEnv>)[] = [
  overviewRoutes,
  metricRoutes,
  sessionRoutes,
  userRoutes,
  liveRoutes,
  exportRoutes,
  funnelRoutes,
  retentionRoutes,
  journeyRoutes,
];
