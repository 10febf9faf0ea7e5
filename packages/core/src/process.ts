import { setTimeout as sleep } from 'node:timers/promises';

/**
 * True while a process with this pid exists on this host. One owned by another OS user (the
 * embedded PostgreSQL runs as `postgres` under root) answers EPERM: it exists.
 */
export function processRuns(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Resolves true once `pid` is gone, false when it still runs after `maxMs`. Another process's
 * exit cannot be awaited as an event, so this polls. Rejects when `signal` aborts.
 */
export async function waitForExit(pid: number, maxMs: number, signal?: AbortSignal): Promise<boolean> {
  const until = Date.now() + maxMs;
  while (processRuns(pid)) {
    if (Date.now() >= until) return false;
    await sleep(50, undefined, { signal });
  }
  return true;
}
