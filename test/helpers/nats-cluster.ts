import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { natsServerBinary } from "../../services/local/nats-binary.js";

/** A free TCP port on loopback (the kernel's pick, released for the server to take). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

export interface ClusterNode {
  name: string;
  url: string;
  process: ChildProcess | undefined;
  /** Starts (or restarts) the server on its own ports and store directory. */
  start(): Promise<void>;
  /** SIGKILL: the crash, not a graceful shutdown. */
  kill(): Promise<void>;
}

export interface NatsCluster {
  nodes: ClusterNode[];
  /** Every client URL, comma-separated (what NATS_URL takes). */
  urls: string;
  stop(): Promise<void>;
}

/**
 * Three `nats-server` processes on 127.0.0.1 forming one JetStream cluster: distinct client and
 * route ports, a store directory each (kept across a kill, so a restarted node catches up from
 * its own data). Server names are `n1`…`n3`, which stream infos report as leaders and replicas.
 */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  // A cluster whose JetStream elects no meta leader (a port taken between its pick and the
  // server's bind, a loaded machine) is started afresh once, rather than failing the suite.
  for (let attempt = 1; ; attempt++) {
    const cluster = await launchCluster(size);
    if (await jetStreamAnswers(cluster.urls, READY_WITHIN_MS)) return cluster;
    await cluster.stop();
    if (attempt >= 2)
      throw new Error(
        `a ${size}-node JetStream cluster answered no JetStream request within ${READY_WITHIN_MS} ms, twice`,
      );
  }
}

const READY_WITHIN_MS = 30_000;

/** Whether JetStream answers a request (it has a meta leader) within `ms`. */
async function jetStreamAnswers(urls: string, ms: number): Promise<boolean> {
  const nc = await connect({ servers: urls.split(",") });
  try {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      try {
        await jetstreamManager(nc, { timeout: 2_000 });
        return true;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    return false;
  } finally {
    await nc.close();
  }
}

/** Distinct free ports: two picks released in turn may otherwise be the same one. */
async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

async function launchCluster(size: number): Promise<NatsCluster> {
  const root = await mkdtemp(join(tmpdir(), "nats-cluster-"));
  const picked = await freePorts(2 * size);
  const ports = Array.from({ length: size }, (_, i) => ({
    client: picked[2 * i]!,
    route: picked[2 * i + 1]!,
  }));
  const routes = ports.map((p) => `nats://127.0.0.1:${p.route}`);
  const nodes = await Promise.all(
    ports.map(async (port, i) => {
      const name = `n${i + 1}`;
      const config = join(root, `${name}.conf`);
      await writeFile(
        config,
        [
          `server_name: ${name}`,
          `listen: 127.0.0.1:${port.client}`,
          `jetstream { store_dir: "${join(root, name)}" }`,
          `cluster { name: agents-test, listen: 127.0.0.1:${port.route}, routes: [${routes.join(", ")}] }`,
        ].join("\n"),
      );
      return makeNode(name, `nats://127.0.0.1:${port.client}`, config);
    }),
  );
  await Promise.all(nodes.map((node) => node.start()));
  return {
    nodes,
    urls: nodes.map((n) => n.url).join(","),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.kill()));
      await rm(root, { recursive: true, force: true });
    },
  };
}

function makeNode(name: string, url: string, config: string): ClusterNode {
  const node: ClusterNode = {
    name,
    url,
    process: undefined,
    start: async () => {
      const child = spawn((await natsServerBinary()).path, ["-c", config], {
        stdio: ["ignore", "ignore", "pipe"],
      });
      node.process = child;
      await new Promise<void>((resolve, reject) => {
        let log = "";
        const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${log}`)), 10_000);
        child.once("exit", (code) => {
          clearTimeout(timer);
          reject(new Error(`${name} exited with ${String(code)}:\n${log}`));
        });
        // Keep draining stderr after start-up (a full pipe would stall the server), keep nothing.
        child.stderr?.on("data", (chunk: Buffer) => {
          if (log.includes("Server is ready")) return;
          log += chunk.toString();
          if (log.includes("Server is ready")) {
            clearTimeout(timer);
            resolve();
          }
        });
      });
    },
    kill: async () => {
      const child = node.process;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
    },
  };
  return node;
}
