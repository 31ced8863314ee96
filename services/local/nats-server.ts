import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { natsServerBinary } from "./nats-binary.js";

export interface LocalNats {
  url: string;
  port: number;
  pid: number | undefined;
  /** The JetStream store directory it was started with (`-sd`), removed on stop. */
  storeDir: string;
  /** The binary started, and its version as it prints it (`v2.15.1`). */
  binary: string;
  version: string;
  /**
   * Kills the server with `signal` (SIGKILL by default: a crash), waits `downMs`, and starts it
   * again on the same port with the same store directory: what it acknowledged is still there.
   */
  restart(options?: { signal?: NodeJS.Signals; downMs?: number }): Promise<void>;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface LocalNatsOptions {
  /** A config file (users, permissions); the port and store directory are always set here. */
  configFile?: string;
  readyTimeoutMs?: number;
  /** Told once when a suitable binary must first be fetched. */
  say?: (line: string) => void;
  /** The port to take when it is free (NATS's 4222, for `npm run cluster`); else a free one. */
  preferPort?: number;
}

interface Running {
  child: ChildProcess;
  exited: Promise<number | null>;
}

/**
 * Starts the `nats-server` binary on 127.0.0.1, on `preferPort` when free, else on a free port
 * (`-p -1`, read back from its log),
 * with JetStream and a store directory of its own, removed on stop. The binary is the one
 * natsServerBinary() finds (fetched once when the machine has none new enough).
 */
export async function startLocalNats(options: LocalNatsOptions = {}): Promise<LocalNats> {
  const binary = await natsServerBinary(options.say);
  const storeDir = await mkdtemp(join(tmpdir(), "nats-local-"));
  const timeoutMs = options.readyTimeoutMs ?? 10_000;
  const launch = async (port: number): Promise<Running & { port: number }> => {
    const args = [
      ...(options.configFile ? ["-c", options.configFile] : []),
      ...["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir],
    ];
    const child = spawn(binary.path, args, { stdio: ["ignore", "ignore", "pipe"] });
    // One promise for the process's end, made before anything can miss the event.
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const bound = await readPort(child, exited, timeoutMs);
      child.stderr?.resume();
      return { child, exited, port: bound };
    } catch (err) {
      child.kill("SIGKILL");
      throw err;
    }
  };
  let running: Running & { port: number };
  try {
    const preferred = options.preferPort;
    running = await (preferred === undefined ? launch(-1) : launch(preferred).catch(() => launch(-1)));
  } catch (err) {
    await rm(storeDir, { recursive: true, force: true });
    throw err;
  }
  const { port } = running;
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    const { child, exited } = running;
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  const stop = async (): Promise<void> => {
    await end("SIGTERM");
    await rm(storeDir, { recursive: true, force: true });
  };
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    binary: binary.path,
    version: binary.version,
    get pid() {
      return running.child.pid;
    },
    restart: async ({ signal = "SIGKILL", downMs = 0 } = {}) => {
      await end(signal);
      await new Promise((resolve) => setTimeout(resolve, downMs));
      running = await launch(port);
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
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
    child.once("error", (err) => settle(() => reject(new Error(`cannot start nats-server: ${err.message}`))));
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
