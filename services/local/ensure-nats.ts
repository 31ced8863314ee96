import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
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

/**
 * The NATS server for a local cluster: NATS_URL when it answers, else a `nats-server` new enough
 * (see natsServerBinary) started with nats.conf on a free loopback port and a temporary store.
 */
export async function ensureNats(say: (line: string) => void, preferPort?: number): Promise<NatsTarget> {
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
  const local = await startLocalNats({
    configFile: NATS_CONF,
    say,
    ...(preferPort === undefined ? {} : { preferPort }),
  });
  return {
    url: local.url,
    useConfUsers: true,
    origin: `local nats-server ${local.version} (pid ${local.pid ?? "?"}) on ${local.url} with nats.conf`,
    stop: () => local.stop(),
  };
}
