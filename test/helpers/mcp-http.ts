import { randomUUID } from "node:crypto";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";

export interface McpHttpServer {
  url: string;
  /** How many MCP sessions were opened. */
  sessions: () => number;
  /** How many requests lacked the required header. */
  refused: () => number;
  close(): Promise<void>;
}

/**
 * An MCP server over streamable HTTP on 127.0.0.1 (`<url>` is its endpoint), one MCP server from
 * `create` per session, as server-everything's own HTTP launcher does (which listens on every
 * interface, so it is not used here).
 */
export async function serveMcpOverHttp(
  create: () => { server: McpServer },
  /** A header every request must carry with this value, else 401 (a token the bridge sends). */
  required?: { name: string; value: string },
): Promise<McpHttpServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  let opened = 0;
  let refused = 0;
  const http = createHttpServer((req, res) => {
    if (required && req.headers[required.name.toLowerCase()] !== required.value) {
      refused += 1;
      res.writeHead(401).end();
      return;
    }
    const session = req.headers["mcp-session-id"];
    const known = typeof session === "string" ? transports.get(session) : undefined;
    if (known) {
      void known.handleRequest(req, res);
      return;
    }
    if (req.method !== "POST" || session !== undefined) {
      res.writeHead(404).end();
      return;
    }
    const { server } = create();
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        opened += 1;
        transports.set(id, transport);
      },
    });
    void server.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sessions: () => opened,
    refused: () => refused,
    close: async () => {
      await Promise.all([...transports.values()].map((t) => t.close()));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
