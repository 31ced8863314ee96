/**
 * `npm run bench` / `npm run bench:quick`: every system, one after the other on this machine,
 * each in its own process tree, against one nats-server; writes `results/<date>.json` and `.md`.
 */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, InvalidArgumentError } from "commander";
import { startLocalNats } from "../dist/services/local/nats-server.js";
import { PLANS, type Plan } from "./lib/plan.ts";
import { markdown, type Results } from "./lib/report.ts";
import { RESULT_PREFIX, type Finding, type Row } from "./lib/row.ts";

const here = dirname(fileURLToPath(import.meta.url));
const W1_SYSTEMS = [
  "ours",
  "ours-fsync",
  "floor-raw",
  "floor-protocol",
  "langgraph-sqlite",
  "langgraph-memory",
  "restate",
];
const OTHER = ["paired", "resume", "history", "parked"];
const ALL = [...W1_SYSTEMS, ...OTHER];

function systemsOption(value: string): string[] {
  const list = value.split(",").map((s) => s.trim());
  const unknown = list.filter((s) => !ALL.includes(s));
  if (unknown.length > 0)
    throw new InvalidArgumentError(`unknown system(s) ${unknown.join(", ")}; known: ${ALL.join(", ")}`);
  return list;
}

const program = new Command("bench")
  .option("--quick", "small N: a smoke run under a minute", false)
  .option("--only <systems>", `comma-separated subset of: ${ALL.join(", ")}`, systemsOption)
  .option("--out <dir>", "where results are written", join(here, "results"))
  .parse();
const opts = program.opts<{ quick: boolean; only?: string[]; out: string }>();
const plan: Plan = PLANS[opts.quick ? "quick" : "full"];
// The floors replay the trace the runtime recorded: ours runs first.
const systems = opts.only ?? ALL;

/** Runs one system's child; what it printed before failing is kept, and the failure is reported. */
function runSystem(
  system: string,
  nats: { url: string; pid?: number },
  traceFile: string,
): Promise<{ results: (Row | Finding)[]; error?: string }> {
  return new Promise((resolve) => {
    const args = [join(here, "runner.ts"), system, plan.mode, nats.url, traceFile, String(nats.pid ?? "")];
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    const out: (Row | Finding)[] = [];
    let buffer = "";
    child.stdout.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      let end: number;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line.startsWith(RESULT_PREFIX))
          out.push(JSON.parse(line.slice(RESULT_PREFIX.length)) as Row | Finding);
      }
    });
    child.once("exit", (code) =>
      resolve({ results: out, ...(code === 0 ? {} : { error: `${system} exited with code ${code}` }) }),
    );
  });
}

/**
 * Ours on a server of its own that fsyncs every write (`sync_interval: always`, what a single node
 * holding the data runs in production): like for like with Restate, which fsyncs.
 */
async function onFsyncServer(system: string): Promise<{ results: (Row | Finding)[]; error?: string }> {
  const dir = await mkdtemp(join(tmpdir(), "bench-fsync-"));
  const configFile = join(dir, "nats.conf");
  await writeFile(configFile, "jetstream { sync_interval: always }\n");
  const fsync = await startLocalNats({ configFile });
  try {
    return await runSystem(system, fsync, "");
  } finally {
    await fsync.stop();
  }
}

const started = performance.now();
const nats = await startLocalNats({});
const traceFile = join(await mkdtemp(join(tmpdir(), "bench-trace-")), "trace.json");
const rows: Row[] = [];
const findings: Finding[] = [];
const failures: string[] = [];
try {
  for (const system of systems) {
    process.stderr.write(`${system}…\n`);
    const { results, error } =
      system === "ours-fsync" ? await onFsyncServer(system) : await runSystem(system, nats, traceFile);
    for (const r of results) {
      if ("workload" in r) findings.push(r);
      else rows.push(r);
    }
    if (error) {
      failures.push(error);
      process.stderr.write(`  FAILED ${error}\n`);
    }
  }
} finally {
  await nats.stop();
}
const version = `nats-server: ${nats.version}`;
const date = new Date().toISOString().slice(0, 10);
const results: Results = {
  date,
  mode: plan.mode,
  machine: { cpus: cpus().length, node: process.version, natsServer: version },
  rows,
  findings,
  ...(opts.only ? { only: opts.only } : {}),
};
await mkdir(opts.out, { recursive: true });
const base = join(opts.out, plan.mode === "full" ? date : `${date}-quick`);
await writeFile(`${base}.json`, `${JSON.stringify({ ...results, failures }, null, 2)}\n`);
const md = markdown(results) + (failures.length ? `\nFailed: ${failures.join("; ")}\n` : "");
await writeFile(`${base}.md`, md);
process.stdout.write(
  `${md}\nwritten: ${base}.json, ${base}.md (${((performance.now() - started) / 1000).toFixed(0)} s)\n`,
);
process.exit(failures.length > 0 ? 1 : 0);
