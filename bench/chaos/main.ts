/**
 * `npm run chaos -- --runs 1000`: a chaos soak users can run. It starts a local cluster of real
 * processes on 127.0.0.1 (cluster.ts), drives runs with the scripted model (mix.ts, driver.ts)
 * while it kills workers, restarts the nats-server once and rolls the supervisor (faults.ts), then
 * checks every run (verdict.ts) and prints one line of figures. Exit code 0 when every check
 * passed, 1 when one failed (or the soak could not run), 2 for a bad flag.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClusterClient } from "../../dist/services/cli/client.js";
import { NATS_USERS } from "../../dist/services/local/cluster.js";
import { openActorBus } from "../../dist/shared/bus/actor.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv } from "../../dist/shared/runtime/config.js";
import { createLogger } from "../../dist/shared/runtime/logger.js";
import { seededRandom, systemRandom } from "../../dist/shared/runtime/random.js";
import { ChaosCluster } from "./cluster.ts";
import { childStatuses, readTrails } from "./collect.ts";
import { driveRuns, type Outcome } from "./driver.ts";
import { Faults } from "./faults.ts";
import { readLedger } from "./ledger.ts";
import { planRuns } from "./mix.ts";
import { parseOptions, type ChaosOptions } from "./options.ts";
import { judge, type Verdict } from "./verdict.ts";

const say = (line: string): void => void process.stderr.write(`${line}\n`);

/** Drives the runs through the faults and judges them; the cluster is stopped by the caller. */
async function soak(
  opts: ChaosOptions,
  cluster: ChaosCluster,
  ledger: string,
  deadline: AbortSignal,
): Promise<Verdict> {
  const bus = await openActorBus(
    ActorEnv.parse({
      NATS_URL: cluster.nats.url,
      NATS_USER: NATS_USERS.cli.user,
      NATS_PASSWORD: NATS_USERS.cli.password,
    }),
    "chaos",
    { clock: systemClock, random: systemRandom, logger: createLogger({ actor: "cli", level: "error" }) },
  );
  try {
    // As agentctl asks: a submit or a decision waits for a supervisor while none answers (one rolling).
    const client = new ClusterClient(bus, { waitMs: 30_000, clock: systemClock, random: systemRandom });
    const tag = Date.now().toString(36);
    const plan = planRuns(opts.runs, opts.approvals, seededRandom(opts.seed), { turnMs: opts.turnMs }, tag);
    const faults = new Faults(
      cluster,
      {
        killEveryMs: opts.killEveryMs,
        maxKills: opts.maxKills,
        ...(opts.natsRestart === false ? {} : { restartAt: opts.natsRestart }),
        natsDownMs: opts.natsDownMs,
        ...(opts.supervisorRoll === false ? {} : { rollAt: opts.supervisorRoll }),
      },
      seededRandom(opts.seed + 1),
      say,
    );
    const started = Date.now();
    let reported = 0;
    faults.start();
    const driven = await driveRuns(client, plan, {
      concurrency: opts.concurrency,
      runTimeoutMs: opts.runTimeoutMs,
      signal: deadline,
      onSettled: (share) => {
        faults.progress(share);
        if (share < reported + 0.1) return;
        reported = Math.floor(share * 10) / 10;
        const secs = Math.round((Date.now() - started) / 1000);
        say(`chaos: ${Math.round(share * opts.runs)} of ${opts.runs} runs settled after ${secs} s`);
      },
    });
    await faults.stop();
    const wallMs = Date.now() - started;
    const drivenIds = new Set(driven.map((o) => o.run.runId));
    const outcomes: Outcome[] = [
      ...driven,
      ...plan
        .filter((run) => !drivenIds.has(run.runId))
        .map((run) => ({ run, status: "unfinished", notes: [] })),
    ];
    const events = await readTrails(client, outcomes);
    const children = await childStatuses(client, events);
    const evidence = {
      outcomes,
      events,
      children,
      ledger: await readLedger(ledger),
      faults: faults.log,
      wallMs,
    };
    const verdict = judge(evidence, { maxStallMs: opts.maxStallMs, maxResumeMs: opts.maxResumeMs });
    return { ...verdict, problems: [...faults.errors.map((e) => `fault failed: ${e}`), ...verdict.problems] };
  } finally {
    await bus.nc.drain().catch(() => undefined);
  }
}

const opts = parseOptions(process.argv.slice(2));
// Past the deadline no run is driven any more; a soak still stopping two minutes later is cut short.
const deadline = AbortSignal.timeout(opts.deadlineMs);
let cluster: ChaosCluster | undefined;
setTimeout(() => {
  say(`chaos: FAIL still running two minutes past its deadline (${opts.deadlineMs} ms): killing its cluster`);
  cluster?.killAll();
  process.exit(1);
}, opts.deadlineMs + 120_000).unref();

const logDir = await mkdtemp(join(tmpdir(), "agents-chaos-"));
const ledger = join(logDir, "ledger.txt");
say(
  `chaos: ${opts.runs} runs, ${opts.workers} workers, concurrency ${opts.concurrency}, seed ${opts.seed}; logs in ${logDir}`,
);
let problems: string[];
try {
  cluster = await ChaosCluster.start({
    workers: opts.workers,
    logDir,
    ledger,
    bookMs: opts.bookMs,
    // Room for every run in flight and its children.
    env: { SUPERVISOR_POOL_CAPACITY: String(opts.concurrency * 3 + 8), LOG_LEVEL: "info" },
  });
  const verdict = await soak(opts, cluster, ledger, deadline);
  problems = verdict.problems;
  for (const problem of problems.slice(0, 50)) say(`chaos: FAIL ${problem}`);
  if (problems.length > 50) say(`chaos: … and ${problems.length - 50} more`);
  process.stdout.write(`${verdict.line}\n`);
} catch (err) {
  problems = [String(err)];
  say(
    `chaos: FAIL the soak could not run: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
  );
} finally {
  await cluster?.stop();
}
if (problems.length === 0 && !opts.keepLogs) await rm(logDir, { recursive: true, force: true });
else say(`chaos: the actors' logs are kept in ${logDir}`);
process.exit(problems.length === 0 ? 0 : 1);
