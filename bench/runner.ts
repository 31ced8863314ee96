/**
 * One system of the benchmark, in its own process (so memory and event-loop contention stay its
 * own): `node runner.ts <system> <full|quick> <natsUrl> <traceFile> [natsServerPid]`. Prints one result
 * per line.
 */
import { readFile, writeFile } from "node:fs/promises";
import { drive, type LoopTiming } from "./lib/drive.ts";
import { PLANS, type Plan } from "./lib/plan.ts";
import { RESULT_PREFIX, type Finding, type Row } from "./lib/row.ts";
import { CpuMeter } from "./lib/cpu.ts";
import { RssSampler } from "./lib/rss.ts";
import { round } from "./lib/stats.ts";
import { captureTrace, type TraceEntry } from "./lib/trace.ts";
import { STEPS } from "./lib/workload.ts";
import { Floor } from "./systems/floor.ts";
import { LangGraphLoop } from "./systems/langgraph.ts";
import { OurCluster, OUR_BENCH_ENV } from "./systems/ours.ts";
import { RestateLoop } from "./systems/restate.ts";
import { measureParked } from "./workloads/parked.ts";
import { measureResume } from "./workloads/resume.ts";
import { measureHistory } from "./workloads/history.ts";
import { measurePaired } from "./workloads/paired.ts";

const WARMUP_LOOPS = 3;

interface System {
  runLoop: () => Promise<LoopTiming>;
  pids: () => Map<string, number>;
  storedBytes: () => Promise<number>;
  /** Whether the system runs on the bench's nats-server, whose CPU then counts as its own. */
  onNats?: true;
}

const emit = (result: Row | Finding): void =>
  void process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(result)}\n`);
const say = (line: string): void => void process.stderr.write(`  ${line}\n`);

async function levels(name: string, variant: string, plan: Plan, system: System): Promise<void> {
  for (let i = 0; i < WARMUP_LOOPS; i += 1) await system.runLoop();
  for (const c of plan.levels) {
    const sampler = new RssSampler(system.pids()).start();
    const cpu = await CpuMeter.start(
      new Map([...system.pids(), ...(system.onNats && natsPid ? [["nats-server", natsPid] as const] : [])]),
    );
    const before = await system.storedBytes();
    const result = await drive(c, plan.loops[c] ?? c, system.runLoop);
    const cpuUsPerStep = await cpu.perStep((result.loops - result.failed) * STEPS);
    const rssMiB = await sampler.stop();
    const bytesPerLoop = round(((await system.storedBytes()) - before) / result.loops);
    emit({ system: name, variant, ...result, rssMiB, bytesPerLoop, cpuUsPerStep });
    say(`${name}/${variant} C=${c}: ${result.msPerStep} ms/step, ${result.stepsPerSec} steps/s`);
  }
}

const self = (): Map<string, number> => new Map([["bench", process.pid]]);

async function ours(plan: Plan, natsUrl: string, traceFile: string, variant = "2 workers"): Promise<void> {
  const cluster = await OurCluster.start(natsUrl, OUR_BENCH_ENV);
  try {
    await cluster.runLoop();
    // The floors replay what ours sent on the default server; the fsync row keeps no trace.
    if (traceFile) {
      const trace = await captureTrace(cluster.bus.nc, () => cluster.runLoop());
      await writeFile(traceFile, JSON.stringify(trace));
    }
    await levels("ours", variant, plan, {
      runLoop: () => cluster.runLoop(),
      pids: () => cluster.pids,
      storedBytes: () => cluster.storedBytes(),
      onNats: true,
    });
  } finally {
    await cluster.stop();
  }
}

async function floor(plan: Plan, natsUrl: string, traceFile: string, only?: "log"): Promise<void> {
  const trace = JSON.parse(await readFile(traceFile, "utf8")) as TraceEntry[];
  const f = await Floor.start(natsUrl);
  try {
    const total = async (): Promise<number> =>
      Object.values(await f.storedBytes()).reduce((a, b) => a + b, 0);
    await levels(
      only ? "floor: raw JetStream" : "floor: our protocol",
      only ? "log appends" : "all messages",
      plan,
      {
        runLoop: () => f.runLoop(trace, only),
        pids: self,
        storedBytes: total,
        onNats: true,
      },
    );
  } finally {
    await f.stop();
  }
}

async function langgraph(plan: Plan, variant: "sqlite-sync" | "memory"): Promise<void> {
  const lg = await LangGraphLoop.create(variant);
  try {
    await levels("langgraph", variant === "memory" ? "MemorySaver" : "SqliteSaver", plan, {
      runLoop: () => lg.runLoop(),
      pids: self,
      storedBytes: () => lg.storedBytes(),
    });
  } finally {
    await lg.stop();
  }
}

async function restate(plan: Plan): Promise<void> {
  const r = await RestateLoop.start();
  try {
    await levels("restate", "ctx.run per step", plan, {
      runLoop: () => r.runLoop(),
      pids: () => new Map([...r.pids, ...self()]),
      storedBytes: () => r.storedBytes(),
    });
  } finally {
    await r.stop();
  }
}

const [system = "", mode = "quick", natsUrl = "", traceFile = "", natsPidArg = ""] = process.argv.slice(2);
const natsPid = Number(natsPidArg) || undefined;
const plan = PLANS[mode as Plan["mode"]];
if (!plan) throw new Error(`unknown plan '${mode}' (full or quick)`);
const runs: Record<string, () => Promise<void>> = {
  ours: () => ours(plan, natsUrl, traceFile),
  "ours-fsync": () => ours(plan, natsUrl, "", "2 workers, sync_interval always"),
  "floor-raw": () => floor(plan, natsUrl, traceFile, "log"),
  "floor-protocol": () => floor(plan, natsUrl, traceFile),
  "langgraph-sqlite": () => langgraph(plan, "sqlite-sync"),
  "langgraph-memory": () => langgraph(plan, "memory"),
  restate: () => restate(plan),
  paired: async () => emit(await measurePaired(plan, natsUrl, say)),
  resume: async () => {
    for (const finding of await measureResume(plan, natsUrl, say)) emit(finding);
  },
  history: async () => {
    for (const finding of await measureHistory(plan, natsUrl, say)) emit(finding);
  },
  parked: async () => emit(await measureParked(plan, natsUrl, say)),
};
const run = runs[system];
if (!run) throw new Error(`unknown system '${system}' (one of ${Object.keys(runs).join(", ")})`);
await run();
process.exit(0);
