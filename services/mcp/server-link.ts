import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import { isStdio, type McpServerConfig } from "./config.js";

/** How long a server has to answer `initialize` and the first `tools/list`. */
const CONNECT_TIMEOUT_MS = 30_000;

/** The delay before restart `attempt` (0-based): doubling from the first, capped. */
export function restartDelay(
  attempt: number,
  restart: { initialDelayMs: number; maxDelayMs: number },
): number {
  return Math.min(restart.maxDelayMs, restart.initialDelayMs * 2 ** Math.min(attempt, 30));
}

export interface ServerLinkDeps {
  clock: Clock;
  logger: Logger;
  /** The bridge's own environment, for `envFrom`. */
  env: Readonly<Record<string, string | undefined>>;
  /** Told the server's tools after every (re)connect and every list_changed notification. */
  onTools: (tools: Tool[]) => void;
  /** Opens the transport of each connection; default: stdio or streamable HTTP, as configured. */
  transport?: () => Transport;
}

type LinkState =
  | { kind: "connecting"; attempt: number }
  | { kind: "ready"; client: Client }
  | { kind: "down"; attempt: number; retryAt: number }
  | { kind: "closed" };

/**
 * One MCP server, kept connected: started (a stdio child, or a streamable HTTP session), its tools
 * listed, listed again when it says they changed, and restarted with a doubling delay whenever it
 * goes away. A call made while it is not connected waits for it up to the server's `callWaitMs`
 * (and the call's own deadline), then fails with TOOL_UNAVAILABLE, which callers retry.
 */
export class McpServerLink {
  private state: LinkState = { kind: "connecting", attempt: 0 };
  private readonly waiters = new Set<() => void>();
  private readonly stopped = new AbortController();

  constructor(
    readonly name: string,
    private readonly config: McpServerConfig,
    private readonly deps: ServerLinkDeps,
  ) {}

  /** Starts keeping the server connected; resolves once its first connection succeeded or failed. */
  start(): Promise<void> {
    return new Promise((firstTried) => void this.keepConnected(firstTried));
  }

  connected(): boolean {
    return this.state.kind === "ready";
  }

  async call(
    name: string,
    args: Record<string, unknown>,
    options: { signal: AbortSignal; timeoutMs: number },
  ): Promise<CallToolResult> {
    const client = await this.readyClient(options.signal);
    // The task-aware call: a tool that requires task execution runs as a task, others as a plain call.
    const stream = client.experimental.tasks.callToolStream({ name, arguments: args }, undefined, {
      signal: options.signal,
      timeout: options.timeoutMs,
    });
    for await (const message of stream) {
      if (message.type === "result") return message.result as CallToolResult;
      if (message.type === "error") throw message.error;
    }
    throw new AgentError(
      "TOOL_FAILED",
      `MCP server '${this.name}' ended the call of '${name}' without a result`,
    );
  }

  async close(): Promise<void> {
    const { state } = this;
    this.state = { kind: "closed" };
    this.stopped.abort(new Error("closed"));
    this.wake();
    if (state.kind === "ready") await state.client.close().catch(() => undefined);
  }

  private async keepConnected(firstTried: () => void): Promise<void> {
    for (let attempt = 0; this.state.kind !== "closed";) {
      this.state = { kind: "connecting", attempt };
      const upAt = this.deps.clock.now();
      const closed = await this.connect().catch((err: unknown) => {
        this.deps.logger.error({ err, server: this.name, attempt }, "MCP server could not be started");
        return undefined;
      });
      firstTried();
      if (closed) await closed.closed;
      if (this.isClosed()) return;
      // A server that stayed up a while starts its backoff over; one that crash-loops backs off.
      attempt = closed && this.deps.clock.now() - upAt >= this.config.restart.maxDelayMs ? 0 : attempt;
      const delayMs = restartDelay(attempt, this.config.restart);
      this.state = { kind: "down", attempt, retryAt: this.deps.clock.now() + delayMs };
      this.deps.logger.warn({ server: this.name, attempt, delayMs }, "MCP server is down: restarting it");
      attempt += 1;
      await this.deps.clock.sleep(delayMs, this.stopped.signal).catch(() => undefined);
    }
  }

  private isClosed(): boolean {
    return this.state.kind === "closed";
  }

  /** Connects and lists the tools; resolves with a promise of the connection's end (wrapped: not awaited here). */
  private async connect(): Promise<{ closed: Promise<void> }> {
    const client = new Client({ name: "bounded-agents-mcp-bridge", version: "1" }, { capabilities: {} });
    const transport = this.deps.transport?.() ?? this.transport();
    let ended: () => void = () => undefined;
    const closed = new Promise<void>((resolve) => (ended = resolve));
    client.onclose = () => ended();
    client.onerror = (err) =>
      this.deps.logger.warn({ err, server: this.name }, "MCP server connection error");
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => void this.listTools(client));
      await this.listTools(client, true);
    } catch (err) {
      await client.close().catch(() => undefined);
      throw err;
    }
    if (this.isClosed()) {
      await client.close().catch(() => undefined);
      return { closed };
    }
    this.state = { kind: "ready", client };
    const pid = transport instanceof StdioClientTransport ? transport.pid : undefined;
    this.deps.logger.info({ server: this.name, pid }, "MCP server connected");
    this.wake();
    return { closed };
  }

  private async listTools(client: Client, rethrow = false): Promise<void> {
    try {
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: CONNECT_TIMEOUT_MS });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      if (!this.isClosed()) this.deps.onTools(tools);
    } catch (err) {
      if (rethrow) throw err;
      this.deps.logger.warn({ err, server: this.name }, "MCP server's tools could not be listed again");
    }
  }

  private transport(): Transport {
    const { config } = this;
    if (!isStdio(config)) {
      return new StreamableHTTPClientTransport(new URL(config.url), {
        requestInit: { headers: { ...config.headers, ...this.fromEnv(config.headersFrom) } },
      });
    }
    const transport = new StdioClientTransport({
      command: config.command,
      args: config.args,
      // Never the bridge's whole environment: it holds the NATS password.
      env: { ...getDefaultEnvironment(), ...this.fromEnv(config.envFrom), ...config.env },
      ...(config.cwd ? { cwd: config.cwd } : {}),
      stderr: "pipe",
    });
    transport.stderr?.on("data", (chunk: Buffer) => {
      this.deps.logger.info(
        { server: this.name, stderr: chunk.toString().slice(0, 2_000) },
        "MCP server stderr",
      );
    });
    return transport;
  }

  /** `{ NAME: BRIDGE_VAR }` as `{ NAME: value }`, from the bridge's environment; unset variables left out. */
  private fromEnv(names: Record<string, string>): Record<string, string> {
    return Object.fromEntries(
      Object.entries(names).flatMap(([to, from]) => {
        const value = this.deps.env[from];
        return value === undefined ? [] : [[to, value] as const];
      }),
    );
  }

  private wake(): void {
    for (const waiter of this.waiters) waiter();
    this.waiters.clear();
  }

  /** The connected client, waited for up to `callWaitMs` (or the call's end) while the server (re)starts. */
  private async readyClient(signal: AbortSignal): Promise<Client> {
    const deadline = this.deps.clock.now() + this.config.callWaitMs;
    for (;;) {
      const { state } = this;
      if (state.kind === "ready") return state.client;
      const left = deadline - this.deps.clock.now();
      if (state.kind === "closed" || left <= 0 || signal.aborted) throw this.unavailable();
      const woken = new AbortController();
      const wake = (): void => woken.abort();
      this.waiters.add(wake);
      await this.deps.clock.sleep(left, AbortSignal.any([woken.signal, signal])).catch(() => undefined);
      this.waiters.delete(wake);
    }
  }

  private unavailable(): AgentError {
    const { state } = this;
    const why =
      state.kind === "closed"
        ? "the bridge is stopping"
        : state.kind === "down"
          ? `it is down, restart ${state.attempt + 1} in ${Math.max(0, state.retryAt - this.deps.clock.now())} ms`
          : "it is starting";
    return new AgentError(
      "TOOL_UNAVAILABLE",
      `MCP server '${this.name}' is not connected (${why}): ask again`,
    );
  }
}
