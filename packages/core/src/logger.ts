import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * JSON lines on stdout; `silent` in tests. Lines are buffered (4 KiB) instead of one write
 * syscall per request line; the buffer is flushed on exit, so only a hard kill can drop the
 * last few access-log lines.
 */
export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  if (level === 'silent') return pino({ level });
  const destination = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  process.once('exit', () => destination.flushSync());
  return pino({ level, base, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}
