import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The dashboard package's folder, and the built files the query service serves. */
export const DASHBOARD_ROOT = dirname(fileURLToPath(import.meta.url));
export const DASHBOARD_DIST = join(DASHBOARD_ROOT, 'dist');
const STAMP = '.source-hash';
const INPUTS = ['index.html', 'vite.config.ts', 'package.json', 'src'];

function files(path: string): string[] {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((name) => files(join(path, name)));
}

/** A hash of every source file's path and content: mtimes change on checkout, contents do not. */
export function sourceHash(): string {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap((p) => files(join(DASHBOARD_ROOT, p)))) {
    hash.update(file.slice(DASHBOARD_ROOT.length)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

export function isBuildFresh(): boolean {
  const stamp = join(DASHBOARD_DIST, STAMP);
  return existsSync(stamp) && readFileSync(stamp, 'utf8') === sourceHash();
}

/**
 * Builds the dashboard when `dist` is missing or older than its sources, so `pnpm start` on a
 * fresh clone serves it. The build goes to a folder of its own and is swapped in whole, so a
 * server reading `dist` never sees half of one.
 */
export async function ensureDashboardBuilt(): Promise<{ built: boolean }> {
  if (isBuildFresh()) return { built: false };
  const hash = sourceHash();
  const out = join(DASHBOARD_ROOT, `dist.tmp-${process.pid}`);
  const { build } = await import('vite');
  await build({
    root: DASHBOARD_ROOT,
    configFile: join(DASHBOARD_ROOT, 'vite.config.ts'),
    logLevel: 'warn',
    build: { outDir: out, emptyOutDir: true },
  });
  writeFileSync(join(out, STAMP), hash);
  rmSync(DASHBOARD_DIST, { recursive: true, force: true });
  renameSync(out, DASHBOARD_DIST);
  return { built: true };
}

// `node --import tsx apps/dashboard/build.ts`: build ahead of time (the container images do, as
// their user cannot write into the application folder at start).
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { built } = await ensureDashboardBuilt();
  console.log(built ? `dashboard built in ${DASHBOARD_DIST}` : 'dashboard build is up to date');
}
