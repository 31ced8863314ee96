import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import { join } from "node:path";
import { compiledEntry } from "./paths.js";

export const ACTOR_KINDS = ["supervisor", "agent", "critic", "tools", "mcp"] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];
/** Kinds the Kubernetes base does not run: each is an optional component (deploy/k8s/components). */
export const OPTIONAL_ACTOR_KINDS: readonly ActorKind[] = ["mcp"];

/**
 * The NATS user each actor kind connects as under `nats.conf` (development passwords). A user's
 * own tool services and model actors connect as `tools` does.
 */
export const NATS_USERS: Record<ActorKind | "cli" | "console", { user: string; password: string }> = {
  supervisor: { user: "supervisor", password: "supervisor-dev" },
  agent: { user: "agent", password: "agent-dev" },
  critic: { user: "critic", password: "critic-dev" },
  tools: { user: "tool", password: "tool-dev" },
  // The MCP bridge is a tool service: it needs what the built-in ones do, and nothing more.
  mcp: { user: "tool", password: "tool-dev" },
  cli: { user: "cli", password: "cli-dev" },
  // The web console (services/console), an actor not every deployment runs.
  console: { user: "console", password: "console-dev" },
};

/** Who an actor logs in as under `nats.conf`. */
export type Login = ActorKind | "console";

/** The compiled entry point of an actor (the same one a container runs). */
export function actorEntry(kind: ActorKind | "cli" | "console"): string {
  return compiledEntry(kind);
}

/** One of the runtime's actors to start. */
export interface RuntimeActor {
  kind: ActorKind;
  name?: string;
  env?: Record<string, string>;
}

/**
 * An actor built on the runtime (an example's tool service or model actor): its compiled entry, and
 * the runtime actor whose NATS user it connects as.
 */
export interface CustomActor {
  entry: string;
  name: string;
  user: Login;
  env?: Record<string, string>;
}

export type ActorLaunch = RuntimeActor | CustomActor;

export interface ActorProcess {
  name: string;
  /** The runtime actor it is, or "custom" for one started from its own entry. */
  kind: ActorKind | "custom";
  child: ChildProcess;
  exited: Promise<number | null>;
  /** Where its `/healthz`, `/readyz` and `/metrics` answer (from its ready line). */
  healthPort?: number;
  /** The URL it serves, when its ready line names one (the web console's). */
  url?: string;
}

export interface LocalClusterOptions {
  natsUrl: string;
  /** Connect each actor as its own nats.conf user. */
  useConfUsers: boolean;
  /** Each actor's JSON log goes to `<logDir>/<name>.log`. */
  logDir: string;
  env?: Record<string, string>;
  readyTimeoutMs?: number;
}

const READY = /^.*"msg":"[^"]*ready".*$/m;

/**
 * Actors as separate OS processes on one machine: what `npm run cluster` and `npm start` run, and
 * what the process-level tests (kill -9, drain) drive. Each actor is started from its compiled
 * entry point and counts as up once it logs that it is ready.
 */
export class LocalCluster {
  readonly actors = new Map<string, ActorProcess>();
  private readonly logs: WriteStream[] = [];

  constructor(private readonly options: LocalClusterOptions) {}

  async start(kind: ActorKind, name: string = kind, env: Record<string, string> = {}): Promise<ActorProcess> {
    return this.launch({ kind, name, env });
  }

  async launch(launch: ActorLaunch): Promise<ActorProcess> {
    const { kind, name, entry, user } =
      "entry" in launch
        ? { kind: "custom" as const, name: launch.name, entry: launch.entry, user: launch.user }
        : {
            kind: launch.kind,
            name: launch.name ?? launch.kind,
            entry: actorEntry(launch.kind),
            user: launch.kind,
          };
    const env = launch.env ?? {};
    const creds = this.options.useConfUsers
      ? { NATS_USER: NATS_USERS[user].user, NATS_PASSWORD: NATS_USERS[user].password }
      : {};
    const log = createWriteStream(join(this.options.logDir, `${name}.log`), { flags: "a" });
    this.logs.push(log);
    const child = spawn(process.execPath, [entry], {
      env: {
        ...process.env,
        NATS_URL: this.options.natsUrl,
        ...creds,
        ...(kind === "agent" ? { WORKER_ID: name } : {}),
        // Several actors share the machine: each health server takes a free port.
        HEALTH_PORT: "0",
        ...this.options.env,
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    const actor: ActorProcess = { name, kind, child, exited };
    this.actors.set(name, actor);
    await this.ready(actor);
    return actor;
  }

  private ready(actor: ActorProcess): Promise<void> {
    const timeoutMs = this.options.readyTimeoutMs ?? 20_000;
    return new Promise((resolve, reject) => {
      let seen = "";
      const timer = setTimeout(
        () => reject(new Error(`${actor.name} was not ready within ${timeoutMs} ms:\n${seen.slice(-2_000)}`)),
        timeoutMs,
      );
      const onData = (chunk: Buffer): void => {
        seen += chunk.toString();
        const line = READY.exec(seen);
        if (line) {
          clearTimeout(timer);
          actor.healthPort = healthPortOf(line[0]);
          const url = /"url":"([^"]+)"/.exec(line[0])?.[1];
          if (url) actor.url = url;
          actor.child.stdout?.off("data", onData);
          resolve();
        }
      };
      actor.child.stdout?.on("data", onData);
      actor.child.stderr?.on("data", (chunk: Buffer) => (seen += chunk.toString()));
      void actor.exited.then((code) => {
        clearTimeout(timer);
        reject(
          new Error(
            `${actor.name} exited with code ${String(code)} before it was ready:\n${seen.slice(-2_000)}`,
          ),
        );
      });
    });
  }

  /** Sends a signal to one actor; SIGKILL is the crash the durability guarantees are about. */
  signal(name: string, signal: NodeJS.Signals): void {
    const actor = this.actors.get(name);
    if (!actor) throw new Error(`no actor '${name}'`);
    actor.child.kill(signal);
  }

  /** SIGTERM to every actor (they drain), SIGKILL to any still running after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    const running = [...this.actors.values()].filter(
      (a) => a.child.exitCode === null && a.child.signalCode === null,
    );
    for (const actor of running) actor.child.kill("SIGTERM");
    await Promise.all(
      running.map(async (actor) => {
        const timer = setTimeout(() => actor.child.kill("SIGKILL"), graceMs);
        await actor.exited;
        clearTimeout(timer);
      }),
    );
    for (const log of this.logs) log.end();
  }
}

/** The `healthPort` field of an actor's ready line (our own log format, so a pattern suffices). */
function healthPortOf(line: string): number | undefined {
  const match = /"healthPort":(\d+)/.exec(line);
  return match ? Number(match[1]) : undefined;
}
