import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../../test/helpers';

/** Runs the fixture service, sends it SIGTERM once it is ready: its exit code and log lines. */
function stopService(arg: string): Promise<{ code: number | null; lines: Record<string, unknown>[] }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(ROOT, 'packages/runtime/test/fixtures/shutdown.ts'), arg],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) child.kill('SIGTERM');
    });
    child.on('error', reject);
    child.on('close', (code) =>
      resolveRun({
        code,
        lines: stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>),
      }),
    );
  });
}

describe('shutdown', () => {
  it('logs "stopped cleanly" only when nothing is left, and says how many rows wait in the buffer otherwise', async () => {
    const clean = await stopService('clean');
    expect(clean.code).toBe(0);
    expect(clean.lines.at(-1)).toMatchObject({ level: 30, msg: 'stopped cleanly' });

    const left = await stopService('left');
    expect(left.code).toBe(0);
    expect(left.lines.at(-1)).toMatchObject({
      level: 40,
      msg: 'stopped; 7 rows left in the buffer, replayed at next start',
      rows: 7,
      segments: 2,
      bytes: 900,
    });
    expect(left.lines.some((l) => l.msg === 'stopped cleanly')).toBe(false);
  }, 30_000);
});
