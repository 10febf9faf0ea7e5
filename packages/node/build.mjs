// Builds dist/esm (ES modules) and dist/cjs (CommonJS, .cjs/.d.cts) with types, using the
// workspace's TypeScript. No bundler: the client is one file with no dependencies.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const common = [
  '--declaration',
  '--strict',
  '--target',
  'ES2022',
  '--lib',
  'ES2022,DOM',
  '--skipLibCheck',
  '--rootDir',
  'src',
];

rmSync(join(here, 'dist'), { recursive: true, force: true });
const run = (args) =>
  execFileSync(process.execPath, [tsc, ...common, ...args, 'src/index.ts'], { cwd: here, stdio: 'inherit' });
run(['--module', 'ESNext', '--moduleResolution', 'Bundler', '--outDir', 'dist/esm']);
run(['--module', 'CommonJS', '--moduleResolution', 'Node10', '--outDir', 'dist/cjs']);

// CommonJS files get .cjs/.d.cts names so they load as CommonJS inside this "type": "module" package.
const cjs = join(here, 'dist/cjs');
for (const file of readdirSync(cjs)) {
  const target = file.replace(/\.js$/, '.cjs').replace(/\.d\.ts$/, '.d.cts');
  if (target !== file) renameSync(join(cjs, file), join(cjs, target));
}
writeFileSync(join(here, 'dist/esm/package.json'), JSON.stringify({ type: 'module' }));
console.log('built', JSON.parse(readFileSync(join(here, 'package.json'), 'utf8')).name);
