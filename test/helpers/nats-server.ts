import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestNats {
  url: string;
  /** Where the server came from: an external NATS_URL, or a binary this suite started. */
  source: "env" | "binary";
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;

/**
 * A real nats-server for one suite: NATS_URL when set (the caller isolates itself with its own
 * prefix), else the `nats-server` binary on 127.0.0.1 with `-p -1` and its own store directory,
 * its port read from its log. `own` always starts a binary (for tests that stop the server).
 * (A Docker engine is not available on the machines this runs on;
 * the testcontainers path comes with the cluster suites.)
 */
export async function startNats(options: { own?: boolean } = {}): Promise<TestNats> {
  const external = options.own ? undefined : process.env.NATS_URL;
  if (external) {
    const stop = (): Promise<void> => Promise.resolve();
    return { url: external, source: "env", stop, [Symbol.asyncDispose]: stop };
  }
  const storeDir = await mkdtemp(join(tmpdir(), "nats-test-"));
  const child = spawn("nats-server", ["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", storeDir], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  // One promise for the process's end, made before anything can miss the event.
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let port: number;
  try {
    port = await readPort(child, exited);
  } catch (err) {
    child.kill("SIGKILL");
    await rm(storeDir, { recursive: true, force: true });
    throw err;
  }
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
    await rm(storeDir, { recursive: true, force: true });
  };
  return { url: `nats://127.0.0.1:${port}`, source: "binary", stop, [Symbol.asyncDispose]: stop };
}

function readPort(child: ChildProcess, exited: Promise<number | null>): Promise<number> {
  return new Promise((resolve, reject) => {
    let log = "";
    let settled = false;
    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const timer = setTimeout(
      () =>
        settle(() => reject(new Error(`nats-server was not ready within ${READY_TIMEOUT_MS} ms:\n${log}`))),
      READY_TIMEOUT_MS,
    );
    child.once("error", (err) =>
      settle(() =>
        reject(
          new Error(`cannot start nats-server (install it: apt-get install nats-server): ${err.message}`),
        ),
      ),
    );
    void exited.then((code) =>
      settle(() => reject(new Error(`nats-server exited with code ${String(code)}:\n${log}`))),
    );
    child.stderr?.on("data", (chunk: Buffer) => {
      log += chunk.toString();
      const port = Number(/Listening for client connections on [\d.]+:(\d+)/.exec(log)?.[1]);
      if (port > 0 && log.includes("Server is ready")) settle(() => resolve(port));
    });
  });
}
