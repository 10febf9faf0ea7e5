import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command in the repository's root and collects what it printed. */
export function runCommand(
  command: string,
  args: string[],
  env: Record<string, string | undefined> = process.env,
): Promise<RunResult> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolveRun({ code, stdout, stderr }));
  });
}

/** Runs a TypeScript entry point of this repo in its own Node process (through tsx). */
export function runEntry(
  entry: string,
  args: string[],
  env: Record<string, string | undefined>,
): Promise<RunResult> {
  return runCommand(process.execPath, ['--import', 'tsx', join(ROOT, entry), ...args], {
    ...cleanEnv(),
    ...env,
  });
}

/** The parent's environment without trackhouse's own variables, so tests choose every store. */
export function cleanEnv(): Record<string, string | undefined> {
  const env = { ...process.env };
  for (const key of ['DATABASE_URL', 'REDIS_URL', 'CLICKHOUSE_URL', 'DATA_DIR', 'SECRET', 'PORT', 'HOST'])
    delete env[key];
  return env;
}

export interface StartedServer {
  url: string;
  child: ChildProcess;
  output: () => string;
  stop: (signal?: NodeJS.Signals) => Promise<number | null>;
}

/**
 * The Node flags `pnpm start` runs the server with (package.json's `start`, those with a value):
 * the benches start the server with them, as it runs.
 */
export function startFlags(): string[] {
  const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  return scripts.start?.match(/--[a-z-]+=\d+/g) ?? [];
}

/**
 * Starts a server entry point on a free port and resolves once it printed its URL; `nodeFlags`
 * go to Node before the entry.
 */
export function startEntry(
  entry: string,
  env: Record<string, string | undefined>,
  nodeFlags: string[] = [],
): Promise<StartedServer> {
  return new Promise((resolveStart, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', join(ROOT, entry)], {
      cwd: ROOT,
      env: { ...cleanEnv(), PORT: '0', LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    // Servers log a line per request: keep only the tail.
    const keep = (d: Buffer) => {
      output += d.toString();
      if (output.length > 256_000) output = output.slice(-64_000);
    };
    const onData = (d: Buffer) => {
      keep(d);
      const match = output.match(/listening on (http:\/\/\S+)/);
      if (match) {
        resolveStart({
          url: match[1]!,
          child,
          output: () => output,
          stop: async (signal = 'SIGTERM') => {
            if (child.exitCode === null) child.kill(signal);
            return exited;
          },
        });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', keep);
    child.once('exit', (code) => reject(new Error(`exited with ${code} before listening:\n${output}`)));
  });
}

export interface SpawnedEntry {
  child: ChildProcess;
  output: () => string;
  /** The exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  /** Resolves with the first match in its output (stdout and stderr); rejects if it exits first. */
  waitFor: (pattern: RegExp) => Promise<RegExpMatchArray>;
}

/** Starts an entry point without waiting for anything: for tests that signal it mid-start. */
export function spawnEntry(entry: string, env: Record<string, string | undefined>): SpawnedEntry {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, entry)], {
    cwd: ROOT,
    env: { ...cleanEnv(), PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (d: Buffer) => {
    output += d.toString();
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const waitFor = (pattern: RegExp) =>
    new Promise<RegExpMatchArray>((resolveMatch, reject) => {
      const check = () => {
        const match = output.match(pattern);
        if (!match) return;
        child.stdout.off('data', check);
        child.stderr.off('data', check);
        resolveMatch(match);
      };
      child.stdout.on('data', check);
      child.stderr.on('data', check);
      check();
      exited.then((code) => reject(new Error(`exited with ${code} before printing ${pattern}:\n${output}`)));
    });
  return { child, output: () => output, exited, waitFor };
}
