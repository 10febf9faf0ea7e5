import { get } from 'node:http';

/**
 * The export's client in `pnpm bench query`: one GET streamed to the end over node:http, in a
 * process of its own, counting lines and bytes, then printing them as JSON with the seconds from
 * the request to the last byte (the process's start left out) and its own CPU time. Inside the
 * bench's process, after the timed runs, the same loop took 10.8 s of CPU for the 10 M-event
 * export against 3.3-3.5 s here, from the two cores the server streams with.
 *
 * `node --import tsx bench/download.ts URL HEADERS_JSON`
 */
const [url, headers] = process.argv.slice(2);
if (!url || !headers) throw new Error('usage: download.ts URL HEADERS_JSON');
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const fail = (message: string): never => {
  console.error(`export: ${message}`);
  process.exit(1);
};
get(url, { headers: JSON.parse(headers) as Record<string, string> }, (res) => {
  if (res.statusCode !== 200) fail(`HTTP ${res.statusCode}`);
  let lines = 0;
  let bytes = 0;
  res.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    // Native search for each newline: a byte loop here was the slowest part of the run.
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
  });
  res.on('end', () => {
    const cpu = process.cpuUsage(cpu0);
    console.log(
      JSON.stringify({
        lines,
        bytes,
        seconds: (performance.now() - t0) / 1000,
        cpuSeconds: (cpu.user + cpu.system) / 1e6,
      }),
    );
  });
  res.on('error', (err) => fail(err.message));
}).on('error', (err) => fail(err.message));
