import type { Subscription } from "@nats-io/transport-node";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { InFlight, stopServing } from "../../shared/bus/in-flight.js";
import { serveTool, type ToolServiceDeps } from "../../shared/bus/tool-service.js";
import { describeTool } from "../../shared/tools/tool.js";
import { isStdio, type McpServersFile } from "./config.js";
import { toolSpec } from "./mapping.js";
import { mcpTool } from "./mcp-tool.js";
import { McpServerLink } from "./server-link.js";

export interface BridgeDeps {
  /** How each tool is served (tool-service.ts), less the fields the bridge fills itself. */
  service: Omit<ToolServiceDeps, "inFlight">;
  env: Readonly<Record<string, string | undefined>>;
  maxOutputBytes: number;
  /** Opens a server's transport; default: stdio or streamable HTTP, as configured. */
  transport?: (server: string) => Transport;
}

interface Served {
  server: string;
  /** Its descriptor as served, to tell a changed tool from the same one listed again. */
  descriptor: string;
  subscriptions: Subscription[];
}

/**
 * The MCP bridge: every configured server kept connected (McpServerLink), and each of its tools
 * served on the cluster as a tool service. When a server lists its tools again (a reconnect, or
 * its list_changed notification), new tools are served, changed ones served anew and removed ones
 * no longer served. A tool whose name another server's tool has taken is not served (logged).
 */
export class McpBridge {
  private readonly links: McpServerLink[] = [];
  private readonly served = new Map<string, Served>();
  private readonly inFlight = new InFlight();

  constructor(
    private readonly config: McpServersFile,
    private readonly deps: BridgeDeps,
  ) {}

  /** Starts every server; resolves once each has connected, or failed to, once. */
  async start(): Promise<void> {
    const { logger, clock } = this.deps.service;
    const { transport } = this.deps;
    for (const [name, server] of Object.entries(this.config.servers)) {
      const link: McpServerLink = new McpServerLink(name, server, {
        clock,
        logger,
        env: this.deps.env,
        onTools: (tools) => this.update(link, tools),
        ...(transport ? { transport: () => transport(name) } : {}),
      });
      this.links.push(link);
    }
    await Promise.all(this.links.map((link) => link.start()));
  }

  /** The cluster names of the tools served, by server. */
  tools(): Record<string, string[]> {
    const byServer: Record<string, string[]> = {};
    for (const [name, { server }] of this.served) (byServer[server] ??= []).push(name);
    return byServer;
  }

  connected(): Record<string, boolean> {
    return Object.fromEntries(this.links.map((link) => [link.name, link.connected()]));
  }

  /** Calls under way finish and are answered; then every server is stopped. */
  async stop(): Promise<void> {
    const subscriptions = [...this.served.values()].flatMap((s) => s.subscriptions);
    this.served.clear();
    await stopServing(subscriptions, this.inFlight);
    await Promise.all(this.links.map((link) => link.close()));
  }

  private update(link: McpServerLink, tools: readonly Tool[]): void {
    const { logger } = this.deps.service;
    const server = this.config.servers[link.name];
    if (!server) return;
    const resolution = isStdio(server) ? "real" : "lexical";
    const listed = new Set<string>();
    for (const tool of tools) {
      const spec = toolSpec(link.name, server, tool);
      if ("skipped" in spec) {
        logger.info({ server: link.name, tool: tool.name, why: spec.skipped }, "MCP tool not served");
        continue;
      }
      const owner = this.served.get(spec.name);
      if (owner && owner.server !== link.name) {
        logger.error(
          { server: link.name, tool: tool.name, name: spec.name, servedBy: owner.server },
          "MCP tool not served: another server's tool has its name (give one a name or a toolPrefix)",
        );
        continue;
      }
      listed.add(spec.name);
      const redact = server.tools[tool.name]?.redact;
      const served = mcpTool(spec, {
        link,
        resolution,
        maxOutputBytes: this.deps.maxOutputBytes,
        ...(redact ? { redact } : {}),
      });
      const descriptor = JSON.stringify(describeTool(served));
      if (owner?.descriptor === descriptor) continue;
      if (owner) this.unserve(spec.name);
      const subscriptions = serveTool(served, { ...this.deps.service, inFlight: this.inFlight });
      this.served.set(spec.name, { server: link.name, descriptor, subscriptions });
    }
    for (const [name, { server: owner }] of this.served)
      if (owner === link.name && !listed.has(name)) this.unserve(name);
    logger.info({ server: link.name, tools: this.tools()[link.name] ?? [] }, "MCP tools served");
  }

  private unserve(name: string): void {
    for (const sub of this.served.get(name)?.subscriptions ?? []) sub.unsubscribe();
    this.served.delete(name);
  }
}
