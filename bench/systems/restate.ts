import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as clients from "@restatedev/restate-sdk-clients";
import type { LoopTiming } from "../lib/drive.ts";
import { dirBytes, freePort, waitFor, waitForLine } from "../lib/process.ts";
import { STEPS } from "../lib/workload.ts";
import type { benchLoop } from "./restate-service.ts";

const here = dirname(fileURLToPath(import.meta.url));

/** The restate-server binary the npm package ships for this platform. */
function serverBinary(): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve("@restatedev/restate-server-linux-x64/package.json");
  return join(dirname(pkg), "bin", "restate-server");
}

/**
 * Restate, the durable-execution engine closest to us: its server (every listener on 127.0.0.1,
 * telemetry off, a fresh data directory) and the W1 service in its own process, registered as a
 * deployment and driven through the ingress.
 */
export class RestateLoop {
  private readonly server: ChildProcess;
  private readonly service: ChildProcess;
  private readonly dataDir: string;
  private readonly ingress: clients.Ingress;

  private constructor(server: ChildProcess, service: ChildProcess, dataDir: string, ingressUrl: string) {
    this.server = server;
    this.service = service;
    this.dataDir = dataDir;
    this.ingress = clients.connect({ url: ingressUrl });
  }

  static async start(): Promise<RestateLoop> {
    const dataDir = await mkdtemp(join(tmpdir(), "bench-restate-"));
    const [ingressPort, adminPort, fabricPort] = [await freePort(), await freePort(), await freePort()];
    const server = spawn(serverBinary(), ["--no-logo"], {
      cwd: dataDir,
      stdio: ["ignore", "ignore", "ignore"],
      env: {
        PATH: process.env.PATH ?? "",
        RESTATE_BASE_DIR: dataDir,
        RESTATE_NODE_NAME: "bench",
        RESTATE_LISTEN_MODE: "tcp",
        RESTATE_BIND_IP: "127.0.0.1",
        RESTATE_DISABLE_TELEMETRY: "true",
        RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingressPort}`,
        RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${adminPort}`,
        RESTATE_BIND_ADDRESS: `127.0.0.1:${fabricPort}`,
        RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${fabricPort}`,
        RESTATE_LOG_FILTER: "warn",
      },
    });
    const service = spawn(process.execPath, [join(here, "restate-service.ts")], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const { port } = JSON.parse(await waitForLine(service, 15_000)) as { port: number };
    const admin = `http://127.0.0.1:${adminPort}`;
    await waitFor(async () => (await fetch(`${admin}/health`)).ok, 30_000, "restate admin API");
    const registered = await fetch(`${admin}/deployments`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ uri: `http://127.0.0.1:${port}` }),
    });
    if (!registered.ok)
      throw new Error(`restate: registering the deployment failed: ${await registered.text()}`);
    const loop = new RestateLoop(server, service, dataDir, `http://127.0.0.1:${ingressPort}`);
    await waitFor(async () => (await loop.runLoop()).ok, 30_000, "restate ingress");
    return loop;
  }

  get pids(): Map<string, number> {
    return new Map([
      ["restate-server", this.server.pid ?? 0],
      ["restate-service", this.service.pid ?? 0],
    ]);
  }

  async runLoop(): Promise<LoopTiming> {
    const t0 = performance.timeOrigin + performance.now();
    const client = this.ingress.serviceClient<typeof benchLoop>({ name: "bench" });
    const { stepEnds } = await client.loop("Echo nineteen times, then answer.");
    const end = performance.timeOrigin + performance.now();
    const stepsMs = stepEnds.map((at, i) => at - (i === 0 ? t0 : stepEnds[i - 1]!));
    return { stepsMs, loopMs: end - t0, ok: stepEnds.length === STEPS };
  }

  /** Bytes under the server's data directory (its log and partition stores). */
  storedBytes(): Promise<number> {
    return dirBytes(this.dataDir);
  }

  async stop(): Promise<void> {
    this.service.kill("SIGKILL");
    this.server.kill("SIGTERM");
    await new Promise((resolve) => this.server.once("exit", resolve));
    await rm(this.dataDir, { recursive: true, force: true });
  }
}
