/**
 * `npm run bench:profile`: where our runtime's CPU goes under W1. Starts nats-server and our
 * cluster with every actor under `--cpu-prof`, runs warm-up loops, then `--loops` loops with `-c`
 * clients (C = 100 by default, where the table's CPU per step is read), stops the actors so they
 * write their profiles, and keeps only the samples taken while the measured loops ran. Writes,
 * per actor, a flame graph (`<actor>.svg`) and, for all of them, `profile.md`: CPU per step by
 * actor, then each actor's self time by place and by function.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import { startLocalNats } from "../dist/services/local/nats-server.js";
import { CpuMeter } from "./lib/cpu.ts";
import {
  monotonicUs,
  readProfile,
  summarise,
  foldedStacks,
  inclusiveTimes,
  topLines,
  type Window,
} from "./lib/cpuprofile.ts";
import { drive } from "./lib/drive.ts";
import { flameGraph } from "./lib/flame.ts";
import { STEPS } from "./lib/workload.ts";
import { OurCluster, OUR_BENCH_ENV } from "./systems/ours.ts";

const here = dirname(fileURLToPath(import.meta.url));
const WARMUP_LOOPS = 20;
/**
 * CPU an actor may spend in the measured loops without a profile sample (1 a millisecond): 10 ms,
 * or 5 % of the loops' wall time when more. An idle actor's CPU (its timers, and the profiler's own
 * sampling thread) grows with the time the loops take, its JavaScript samples do not; the sampling
 * thread alone costs an idle Node 24 process about 3 % of a core.
 */
const IDLE_CPU_MS = 10;
const IDLE_CPU_SHARE = 0.05;

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive integer");
  return n;
}

const date = new Date().toISOString().slice(0, 10);
const opts = new Command("bench:profile")
  .option("-c, --concurrency <n>", "concurrent loops", positive, 100)
  .option("--loops <n>", "loops measured (after warm-up)", positive, 600)
  .option("--out <dir>", "where the flame graphs and profile.md go", join(here, "results", `profile-${date}`))
  .parse()
  .opts<{ concurrency: number; loops: number; out: string }>();

interface Measured {
  window: Window;
  pids: Map<string, number>;
  steps: number;
  stepsPerSec: number;
  cpuUsPerStep: Record<string, number>;
}

/** Runs the level on a cluster whose actors write their profiles into `profDir` when they stop. */
async function measure(profDir: string): Promise<Measured> {
  await using nats = await startLocalNats({});
  const cluster = await OurCluster.start(nats.url, {
    ...OUR_BENCH_ENV,
    NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profDir}`,
  });
  try {
    const pids = cluster.pids;
    for (let i = 0; i < WARMUP_LOOPS; i += 1) await cluster.runLoop();
    const cpu = await CpuMeter.start(
      new Map([...pids, ...(nats.pid ? [["nats-server", nats.pid] as const] : [])]),
    );
    const fromUs = monotonicUs();
    const result = await drive(opts.concurrency, opts.loops, () => cluster.runLoop());
    const window = { fromUs, toUs: monotonicUs() };
    const steps = (result.loops - result.failed) * STEPS;
    if (result.failed > 0) process.stderr.write(`${result.failed} loop(s) failed\n`);
    return { window, pids, steps, stepsPerSec: result.stepsPerSec, cpuUsPerStep: await cpu.perStep(steps) };
  } finally {
    // A profile is written when its process exits: the actors must stop, not be killed.
    await cluster.stop();
  }
}

const profDir = await mkdtemp(join(tmpdir(), "bench-prof-"));
const { window, pids, steps, stepsPerSec, cpuUsPerStep } = await measure(profDir);
await mkdir(opts.out, { recursive: true });
const files = await readdir(profDir);
const sections: string[] = [];
const missing: string[] = [];
const idle: string[] = [];
const perActor: string[] = [];
for (const [actor, pid] of [...pids].sort((a, b) => a[0].localeCompare(b[0]))) {
  const file = files.find((f) => f.split(".")[3] === String(pid));
  if (!file) {
    missing.push(`${actor}: no profile was written (did it exit on its own?)`);
    continue;
  }
  const profile = await readProfile(join(profDir, file));
  const summary = summarise(profile, window);
  if (summary.busyUs === 0) {
    // An actor may sit the measured loops out (the tool services, when the worker runs the loops'
    // tools itself); one that spent CPU in them and left no sample of it means the window or the
    // profile is wrong.
    const cpuMs = Math.round(((cpuUsPerStep[actor] ?? 0) * steps) / 1000);
    const idleMs = Math.max(IDLE_CPU_MS, ((window.toUs - window.fromUs) / 1000) * IDLE_CPU_SHARE);
    if (cpuMs >= idleMs)
      missing.push(`${actor}: no sample inside the measured loops, where it spent ${cpuMs} ms of CPU`);
    else idle.push(actor);
  }
  const title = `${actor}: W1, C = ${opts.concurrency}, ${opts.loops} loops (${(summary.busyUs / 1000).toFixed(0)} ms busy)`;
  const folded = foldedStacks(profile, window);
  await writeFile(join(opts.out, `${actor}.svg`), flameGraph(folded, { title }));
  const ownCode = inclusiveTimes(folded, (frame) => / dist\//.test(frame));
  perActor.push(
    `| ${actor} | ${cpuUsPerStep[actor] ?? "?"} | ${(summary.busyUs / 1000).toFixed(0)} | ${(summary.idleUs / 1000).toFixed(0)} |`,
  );
  sections.push(
    [
      `### ${actor}`,
      "",
      `[flame graph](${actor}.svg)`,
      "",
      "```",
      "by place (self time):",
      ...topLines(summary.byPlace, summary.busyUs, 12),
      "by function (self time):",
      ...topLines(summary.byFunction, summary.busyUs, 20),
      "the runtime's functions, with what they call (inclusive time):",
      ...topLines(ownCode, summary.busyUs, 20),
      "```",
      "",
    ].join("\n"),
  );
}
await rm(profDir, { recursive: true, force: true });
if (idle.length === pids.size) missing.push("no actor has a sample inside the measured loops");

const md = [
  `## CPU profile ${date}: W1, C = ${opts.concurrency}`,
  "",
  `${opts.loops} loops (${steps} steps, ${stepsPerSec} steps/s under the profiler) after ${WARMUP_LOOPS} warm-up loops; only samples taken while the measured loops ran. \`npm run bench:profile -- -c ${opts.concurrency} --loops ${opts.loops}\`.`,
  "",
  "CPU µs/step is each process's CPU time (user and system, from `/proc`) over all the level's steps, as in the benchmark's table but under the profiler, which adds its own. A profile's time is wall time between samples: `busy` counts the time a process was running or waiting for a core (compare it with its CPU time), `idle` the time its event loop waited for work. Shares within a process, and the flame graphs, are of its busy time.",
  "",
  "| process | CPU µs/step | busy ms | idle ms |",
  "|---|---:|---:|---:|",
  ...perActor,
  ...(cpuUsPerStep["nats-server"] === undefined
    ? []
    : [`| nats-server | ${cpuUsPerStep["nats-server"]} | | |`]),
  "",
  ...sections,
  ...idle.map((actor) => `- Idle: ${actor} did no work during the measured loops`),
  ...missing.map((line) => `- Missing: ${line}`),
].join("\n");
await writeFile(join(opts.out, "profile.md"), md);
process.stdout.write(`${md}\nwritten: ${opts.out}\n`);
if (missing.length > 0) {
  process.stderr.write(`bench:profile: ${missing.join("; ")}\n`);
  process.exit(1);
}
