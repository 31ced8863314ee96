import { readFile } from "node:fs/promises";

/** Resident set size of a process in bytes, from /proc (Linux); undefined once it has exited. */
export async function rssOf(pid: number): Promise<number | undefined> {
  try {
    const status = await readFile(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/**
 * The peak RSS of each named process while a workload runs, sampled every `everyMs` (VmHWM would
 * give the peak over the whole life of the process, not of one workload).
 */
export class RssSampler {
  private readonly peaks = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  private readonly pids: ReadonlyMap<string, number>;
  private readonly everyMs: number;

  constructor(pids: ReadonlyMap<string, number>, everyMs = 100) {
    this.pids = pids;
    this.everyMs = everyMs;
  }

  start(): this {
    this.timer = setInterval(() => void this.sample(), this.everyMs);
    void this.sample();
    return this;
  }

  private async sample(): Promise<void> {
    for (const [name, pid] of this.pids) {
      const rss = await rssOf(pid);
      if (rss !== undefined) this.peaks.set(name, Math.max(this.peaks.get(name) ?? 0, rss));
    }
  }

  /** Stops sampling; the peak per process in MiB. */
  async stop(): Promise<Record<string, number>> {
    clearInterval(this.timer);
    await this.sample();
    return Object.fromEntries([...this.peaks].map(([name, bytes]) => [name, Math.round(bytes / 2 ** 20)]));
  }
}
