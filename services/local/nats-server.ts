import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface LocalNats {
  url: string;
  port: number;
  pid: number | undefined;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface LocalNatsOptions {
  /** A config file (users, permissions); the port and store directory are always set here. */
  configFile?: string;
  readyTimeoutMs?: number;
}

/**
 * Starts the `nats-server` binary on 127.0.0.1, on a free port (`-p -1`, read back from its log),
 * with JetStream and a store directory of its own, removed on stop.
 */
export async function startLocalNats(options: LocalNatsOptions = {}): Promise<LocalNats> {
  const storeDir = await mkdtemp(join(tmpdir(), "nats-local-"));
  const args = [
    ...(options.configFile ? ["-c", options.configFile] : []),
    "-a",
    "127.0.0.1",
    "-p",
    "-1",
    "-js",
    "-sd",
    storeDir,
  ];
  const child = spawn("nats-server", args, { stdio: ["ignore", "ignore", "pipe"] });
  // One promise for the process's end, made before anything can miss the event.
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let port: number;
  try {
    port = await readPort(child, exited, options.readyTimeoutMs ?? 10_000);
  } catch (err) {
    child.kill("SIGKILL");
    await rm(storeDir, { recursive: true, force: true });
    throw err;
  }
  child.stderr?.resume();
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
    await rm(storeDir, { recursive: true, force: true });
  };
  return { url: `nats://127.0.0.1:${port}`, port, pid: child.pid, stop, [Symbol.asyncDispose]: stop };
}

function readPort(child: ChildProcess, exited: Promise<number | null>, timeoutMs: number): Promise<number> {
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
      () => settle(() => reject(new Error(`nats-server was not ready within ${timeoutMs} ms:\n${log}`))),
      timeoutMs,
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
