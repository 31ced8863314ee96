import { readdir, readFile } from "node:fs/promises";

/** A `sleep` duration no other process uses, to find the process by its command line. */
export const sleepMarker = (): string => `3600.${process.pid}${Math.floor(Math.random() * 1e6)}`;

/** The processes running `sleep <duration>` (Linux /proc; a dead one awaiting its reaper is not running). */
export async function sleeping(duration: string): Promise<number[]> {
  const found: number[] = [];
  for (const pid of (await readdir("/proc")).filter((name) => /^\d+$/.test(name))) {
    const [cmdline, stat] = await Promise.all([
      readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => ""),
      readFile(`/proc/${pid}/stat`, "utf8").catch(() => ""),
    ]);
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    if (cmdline === `sleep\0${duration}\0` && !["Z", "X", ""].includes(state)) found.push(Number(pid));
  }
  return found;
}
