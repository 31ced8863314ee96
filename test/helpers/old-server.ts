import { createServer, type Server, type Socket } from "node:net";

/**
 * A TCP server that speaks just enough of the NATS client protocol (INFO, then PONG to every PING)
 * to announce `version`: what a client sees of an old nats-server before it sends any request.
 */
export async function announcingServer(version: string): Promise<{ url: string } & AsyncDisposable> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    const { port } = server.address() as { port: number };
    const info = {
      server_id: "OLD",
      version,
      proto: 1,
      host: "127.0.0.1",
      port,
      headers: true,
      max_payload: 1 << 20,
    };
    socket.write(`INFO ${JSON.stringify(info)}\r\n`);
    socket.on("data", (chunk: Buffer) => {
      for (const _ of chunk.toString().matchAll(/PING\r\n/g)) socket.write("PONG\r\n");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `nats://127.0.0.1:${port}`,
    [Symbol.asyncDispose]: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
