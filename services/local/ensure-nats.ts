import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { AgentError } from "../../shared/runtime/errors.js";
import { startLocalNats } from "./nats-server.js";
import { repoRoot } from "./paths.js";

export interface NatsTarget {
  url: string;
  /** True when we started the server with nats.conf: actors then connect as their own users. */
  useConfUsers: boolean;
  /** How it was found, for the screen. */
  origin: string;
  stop(): Promise<void>;
}

export const NATS_CONF = join(repoRoot(), "nats.conf");

async function reachable(url: string, user?: string, pass?: string): Promise<boolean> {
  try {
    const nc = await connect({
      servers: url.split(","),
      timeout: 2_000,
      ...(user ? { user, pass: pass ?? "" } : {}),
    });
    await nc.close();
    return true;
  } catch {
    return false;
  }
}

function hasBinary(): boolean {
  return !spawnSync("nats-server", ["--version"], { stdio: "ignore" }).error;
}

/** Debian's nats-server, installed only when we may (root on Debian or Ubuntu), and said out loud. */
function install(say: (line: string) => void): void {
  const root = process.getuid?.() === 0;
  if (root && existsSync("/etc/debian_version")) {
    say("nats-server is not installed: installing Debian's package with apt-get (running as root)…");
    const update = spawnSync("apt-get", ["update"], { stdio: "inherit" });
    const add = spawnSync("apt-get", ["install", "-y", "nats-server"], { stdio: "inherit" });
    if (update.status === 0 && add.status === 0 && hasBinary()) return;
  }
  throw new AgentError(
    "BUS_UNAVAILABLE",
    "no NATS server: NATS_URL is unset or unreachable and there is no nats-server on PATH. Install one " +
      "(Debian/Ubuntu: `sudo apt-get install nats-server`; macOS: `brew install nats-server`; or run the " +
      "`nats` container image with -js) or set NATS_URL to a reachable server.",
  );
}

/**
 * The NATS server for a local cluster: NATS_URL when it answers, else a `nats-server` started
 * from PATH with nats.conf on a free loopback port and a temporary store.
 */
export async function ensureNats(say: (line: string) => void): Promise<NatsTarget> {
  const wanted = process.env.NATS_URL;
  if (wanted) {
    if (await reachable(wanted, process.env.NATS_USER, process.env.NATS_PASSWORD)) {
      return {
        url: wanted,
        useConfUsers: false,
        origin: `NATS_URL ${wanted}`,
        stop: () => Promise.resolve(),
      };
    }
    say(`NATS_URL ${wanted} does not answer: starting a local nats-server instead`);
  }
  if (!hasBinary()) install(say);
  const local = await startLocalNats({ configFile: NATS_CONF });
  return {
    url: local.url,
    useConfUsers: true,
    origin: `local nats-server (pid ${local.pid ?? "?"}) on ${local.url} with nats.conf`,
    stop: () => local.stop(),
  };
}
