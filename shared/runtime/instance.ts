import { hostname } from "node:os";
import type { Random } from "./random.js";

/**
 * A process's name in roll calls: the host (a pod's name in Kubernetes), the pid and a random
 * suffix, so that a restarted pod with the same host and pid is still a new instance.
 */
export function instanceName(random: Random, host = hostname(), pid = process.pid): string {
  const suffix = Math.floor(random.next() * 0x1_0000_0000)
    .toString(16)
    .padStart(8, "0");
  return `${host}-${pid}-${suffix}`.slice(0, 200);
}
