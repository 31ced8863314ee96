import { spawnSync } from "node:child_process";
import { readFile } from "node:fs/promises";

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100 on Linux unless built otherwise). */
const TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout?.trim()) || 100;

/** CPU time a process has used so far (user and system), ms, from /proc; undefined once it has exited. */
export async function cpuMsOf(pid: number): Promise<number | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    // The command name may hold spaces: fields are counted from the closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS;
  } catch {
    return undefined;
  }
}

/**
 * The CPU time each process spends while a workload runs. On a host with few cores a system's
 * throughput under concurrency is bounded by the CPU all its processes spend per step (nats-server
 * included), whatever its latency: this shows that bound next to the measured rate.
 */
export class CpuMeter {
  private readonly pids: ReadonlyMap<string, number>;
  private readonly before: Map<string, number>;

  private constructor(pids: ReadonlyMap<string, number>, before: Map<string, number>) {
    this.pids = pids;
    this.before = before;
  }

  static async start(pids: ReadonlyMap<string, number>): Promise<CpuMeter> {
    return new CpuMeter(pids, await snapshot(pids));
  }

  /** Microseconds of CPU per step, per process, since `start`. */
  async perStep(steps: number): Promise<Record<string, number>> {
    const after = await snapshot(this.pids);
    const out: Record<string, number> = {};
    for (const [name, ms] of after) {
      const spent = ms - (this.before.get(name) ?? ms);
      out[name] = Math.round((spent * 1000) / Math.max(1, steps));
    }
    return out;
  }
}

async function snapshot(pids: ReadonlyMap<string, number>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const [name, pid] of pids) {
    const ms = await cpuMsOf(pid);
    if (ms !== undefined) out.set(name, ms);
  }
  return out;
}
