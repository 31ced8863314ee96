import { readFileSync } from "node:fs";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { z } from "zod";
import { decode } from "../../shared/bus/codec.js";
import { repoRoot } from "./paths.js";

/** How to reach the cluster `npm run cluster` keeps up: its server, agentctl's login, its process. */
const LocalClusterFile = z.object({
  url: z.string().min(1),
  user: z.string().optional(),
  password: z.string().optional(),
  pid: z.number().int().positive(),
});
type LocalClusterFile = z.infer<typeof LocalClusterFile>;

/** `AGENTS_LOCAL_CLUSTER_FILE`, else `.cache/local-cluster.json` in this checkout. */
function pathOf(env: NodeJS.ProcessEnv): string {
  return env.AGENTS_LOCAL_CLUSTER_FILE ?? join(repoRoot(), ".cache", "local-cluster.json");
}

/**
 * Written once the cluster is up; removed when it stops (see localClusterEnv), unless another
 * cluster started from this checkout has written its own since.
 */
export async function writeClusterFile(
  cluster: LocalClusterFile,
  env: NodeJS.ProcessEnv = process.env,
): Promise<() => Promise<void>> {
  const path = pathOf(env);
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${JSON.stringify(cluster)}\n`, { mode: 0o600 });
  return async () => {
    if (readClusterFile(path)?.pid === cluster.pid) await rm(path, { force: true });
  };
}

/**
 * For agentctl run from this checkout with NATS_URL unset: the running local cluster's URL and,
 * unless NATS_USER or a key file is set, agentctl's login to it. Nothing when no local cluster is up (no file,
 * or its process is gone: a cluster killed before it could remove it).
 */
export function localClusterEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  if (env.NATS_URL !== undefined) return {};
  const path = pathOf(env);
  const cluster = readClusterFile(path);
  if (!cluster || !alive(cluster.pid)) return {};
  const { url, user, password } = cluster;
  const keyed = Boolean(env.NATS_NKEY_SEED_FILE ?? env.NATS_CREDS_FILE);
  const login = env.NATS_USER === undefined && !keyed && user !== undefined;
  return { NATS_URL: url, ...(login ? { NATS_USER: user, NATS_PASSWORD: password ?? "" } : {}) };
}

/** The file as written, or undefined for none, or one unreadable or not ours (no cluster then). */
function readClusterFile(path: string): LocalClusterFile | undefined {
  try {
    return decode(LocalClusterFile, readFileSync(path));
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
