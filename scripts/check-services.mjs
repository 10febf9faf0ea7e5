// Exits non-zero unless every URL given in the environment variables named on the command line
// accepts TCP connections: CI must run the production-path tests, never skip them silently.
import { connect } from 'node:net';

const defaults = { 'postgres:': 5432, 'postgresql:': 5432, 'redis:': 6379, 'http:': 80 };
const names = process.argv.slice(2);
let failed = false;
for (const name of names) {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is not set`);
    failed = true;
    continue;
  }
  const url = new URL(value);
  const port = Number(url.port || defaults[url.protocol]);
  const ok = await new Promise((resolve) => {
    const socket = connect({ host: url.hostname, port, timeout: 3000 });
    socket.once('connect', () => {
      socket.end();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
  console.log(`${name}: ${url.hostname}:${port} ${ok ? 'reachable' : 'UNREACHABLE'}`);
  if (!ok) failed = true;
}
process.exit(failed ? 1 : 0);
