/**
 * What the pure loop core costs per step, early in a run and long after: a run with W3's
 * 32-message context window drives the core alone (no NATS, no shell), one echo call per model
 * turn, and the time per step is taken over the first 250 steps and over steps 1,001–2,000, past
 * the repeated-call guard's window of 256 calls. A step should cost the same at step 2,000 as at
 * step 200. Each `--dist DIR` (a build's `dist`, the default this repository's) is timed in turns
 * in one process, so an older build (`git worktree add`, `npm ci`, `npm run build` there) runs
 * side by side with this one.
 * `--every 1000000` leaves checkpoints out, for what a step costs without them.
 * `node bench/micro/step-cost.ts [--rounds N] [--every N] [--dist DIR]...` after `npm run build`.
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type * as Fsm from "../../dist/shared/loop/fsm.js";
import type * as Specs from "../../dist/shared/contracts/run-spec.js";
import type * as Registry from "../../dist/shared/tools/registry.js";
import type * as Echo from "../../dist/shared/tools/builtin/echo.js";
import type { Transition } from "../../dist/shared/loop/state.js";
import { median, round } from "../lib/stats.ts";
import { echoRunSpec, nextEchoEvent } from "../lib/echo-run.ts";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    dist: { type: "string", multiple: true },
    // A checkpoint considered every N model responses (the product's default when absent).
    every: { type: "string" },
  },
});
const ROUNDS = Number(values.rounds);
const DISTS = values.dist ?? [fileURLToPath(new URL("../../dist", import.meta.url))];
const STEPS = 2_000;
const EARLY = [1, 250] as const;
const LATE = [1_001, 2_000] as const;

/** One run: ms per step early and late; the bytes (as JSON) of its log, and of its checkpoints. */
interface Driven {
  early: number;
  late: number;
  log: number;
  checkpoints: number;
}

interface Core {
  dist: string;
  drive: () => Driven;
}

async function load(dist: string): Promise<Core> {
  const { startRun, transition } = (await import(`${dist}/shared/loop/fsm.js`)) as typeof Fsm;
  const { RunSpec } = (await import(`${dist}/shared/contracts/run-spec.js`)) as typeof Specs;
  const { ToolRegistry } = (await import(`${dist}/shared/tools/registry.js`)) as typeof Registry;
  const { echoTool } = (await import(`${dist}/shared/tools/builtin/echo.js`)) as typeof Echo;
  const every = values.every === undefined ? {} : { checkpointEvery: Number(values.every) };
  const config = { tools: new ToolRegistry([echoTool]).descriptors(), ...every };
  // Far from the limits: past 80 % of them every step would add a warning.
  const spec = RunSpec.parse(echoRunSpec("step-cost", STEPS * 2, 32));
  const drive = (): Driven => {
    const at = Date.now();
    const runId = "run-step-cost";
    const start = { type: "start", at, spec, runId, rootRunId: runId, depth: 0, auditSeq: 0 } as const;
    let t: Transition = startRun(start, config);
    let step = 0;
    const spent = { early: 0, late: 0, log: 0, checkpoints: 0 };
    for (;;) {
      const event = nextEchoEvent(t, step, STEPS, at);
      if (!event) {
        const { log, checkpoints } = spent;
        const early = spent.early / (EARLY[1] - EARLY[0] + 1);
        return { early, late: spent.late / (LATE[1] - LATE[0] + 1), log, checkpoints };
      }
      if (event.type === "modelResponded") step += 1;
      const t0 = performance.now();
      t = transition(t.state, event, config);
      const took = performance.now() - t0;
      for (const e of t.effects) {
        if (e.type !== "wal") continue;
        const bytes = JSON.stringify(e.record).length;
        spent.log += bytes;
        if (e.record.type === "CHECKPOINT") spent.checkpoints += bytes;
      }
      if (step >= EARLY[0] && step <= EARLY[1]) spent.early += took;
      else if (step >= LATE[0] && step <= LATE[1]) spent.late += took;
    }
  };
  return { dist, drive };
}

const cores = await Promise.all(DISTS.map(load));
const runs = cores.map((): Driven[] => []);
// One uncounted run each first, so every build is compiled by V8 before it is timed.
for (const core of cores) core.drive();
for (let r = 0; r < ROUNDS; r += 1) cores.forEach((core, i) => runs[i]!.push(core.drive()));
console.log(`core µs/step, medians of ${ROUNDS} runs of ${STEPS} steps (32-message window), in turns:`);
console.log("| build | steps 1–250 | steps 1,001–2,000 | late / early | log KB/step | of it checkpoints |");
console.log("|---|---:|---:|---:|---:|---:|");
cores.forEach((core, i) => {
  const driven = runs[i]!;
  const early = median(driven.map((d) => d.early * 1000));
  const late = median(driven.map((d) => d.late * 1000));
  // The log is the same in every run of a build.
  const { log, checkpoints } = driven[0]!;
  const perStep = round(log / STEPS / 1000);
  const share = `${Math.round((100 * checkpoints) / log)} %`;
  console.log(
    `| ${core.dist} | ${round(early)} | ${round(late)} | ${round(late / early)}× | ${perStep} | ${share} |`,
  );
});
