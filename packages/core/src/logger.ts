import pino, { type Logger } from 'pino';

export type { Logger };

/** JSON lines on stdout; `silent` in tests. */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base, timestamp: pino.stdTimeFunctions.isoTime });
}
