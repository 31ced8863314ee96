import { readdir, readFile } from "node:fs/promises";

/** A `sleep` duration no other process uses, to find the processes that name it. */
export const sleepMarker = (): string => `3600.${process.pid}${Math.floor(Math.random() * 1e6)}`;

/**
 * A shell script that detaches `sleep <marker>` into a session of its own (`setsid`) and waits
 * until it has (a file appears in the working directory), so a process group kill cannot catch it
 * before it leaves; then prints `started`.
 */
export const detachingScript = (marker: string): string =>
  `setsid sh -c 'echo > ${marker}.ready; exec sleep ${marker}' & while [ ! -e ${marker}.ready ]; do :; done; echo started`;

/** The processes whose command line holds `marker` (Linux /proc; a dead one awaiting its reaper is not running). */
export async function sleeping(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const pid of (await readdir("/proc")).filter((name) => /^\d+$/.test(name))) {
    const [cmdline, stat] = await Promise.all([
      readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => ""),
      readFile(`/proc/${pid}/stat`, "utf8").catch(() => ""),
    ]);
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    if (cmdline.split("\0").some((arg) => arg.includes(marker)) && !["Z", "X", ""].includes(state))
      found.push(Number(pid));
  }
  return found;
}
