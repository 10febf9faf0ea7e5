import { benchDashboard } from './dashboard';
import { benchForms } from './forms';
import { benchIngest } from './ingest';
import { benchProfile } from './profile';
import { benchQuery } from './query';
import { benchStatement } from './statement';

const [what, ...args] = process.argv.slice(2);
const benches: Record<string, (args: string[]) => Promise<void>> = {
  dashboard: benchDashboard,
  forms: benchForms,
  ingest: benchIngest,
  profile: benchProfile,
  query: benchQuery,
  statement: benchStatement,
};
const run = what ? benches[what] : undefined;
if (!run) {
  console.error(`usage: pnpm bench <${Object.keys(benches).join('|')}> [options]`);
  process.exit(2);
}
run(args).then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
