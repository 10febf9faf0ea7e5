import type { HttpEnv } from '@trackhouse/core';
import type { Hono } from 'hono';
import type { QueryContext } from '../../context';
import { autocaptureRoutes } from './autocapture';
import { errorRoutes } from './errors';
import { exportRoutes } from './export';
import { funnelRoutes } from './funnels';
import { journeyRoutes } from './journeys';
import { liveRoutes } from './live';
import { metricRoutes } from './metric';
import { overviewRoutes } from './overview';
import { performanceRoutes } from './performance';
import { replayRoutes } from './replay';
import { retentionRoutes } from './retention';
import { sessionRoutes } from './sessions';
import { traitRoutes } from './traits';
import { userRoutes } from './users';

/** SPEC 13's traffic analytics, one router per resource. */
export const analyticsRoutes: ((ctx: QueryContext) => Hono<HttpEnv>)[] = [
  overviewRoutes,
  metricRoutes,
  sessionRoutes,
  userRoutes,
  liveRoutes,
  exportRoutes,
  traitRoutes,
  replayRoutes,
  errorRoutes,
  performanceRoutes,
  autocaptureRoutes,
  funnelRoutes,
  retentionRoutes,
  journeyRoutes,
];
