import type { NatsConnection } from "@nats-io/transport-node";
import { AgentError } from "../runtime/errors.js";

/** The oldest nats-server the wire contract runs on: batched direct gets (2.11), the fence checked before dedupe (2.12). */
export const MIN_SERVER_VERSION = "2.12.0";

/** Where a newer server comes from, said wherever an old one is refused. */
export const NEWER_SERVER_HINT =
  "Debian's unstable suite packages 2.15 (npm start and npm test fetch it themselves), " +
  "`brew install nats-server`, the official image nats:2.15.1-alpine, " +
  "or `go install github.com/nats-io/nats-server/v2@latest`";

type Version = [number, number, number];

/** A version string as [major, minor, patch]; [0, 0, 0] when it says nothing. */
export function parseVersion(text: string | undefined): Version {
  const [major = 0, minor = 0, patch = 0] = (/(\d+)\.(\d+)\.(\d+)/.exec(text ?? "") ?? [])
    .slice(1)
    .map(Number);
  return [major, minor, patch];
}

/** The connected server's version as [major, minor, patch]; [0, 0, 0] when it did not say. */
export function serverVersion(nc: NatsConnection): Version {
  return parseVersion(nc.info?.version);
}

export function isSupportedVersion(text: string | undefined): boolean {
  const found = parseVersion(text);
  const min = parseVersion(MIN_SERVER_VERSION);
  for (let i = 0; i < 3; i += 1) {
    if (found[i] !== min[i]) return (found[i] ?? 0) > (min[i] ?? 0);
  }
  return true;
}

/** Refuses a server older than MIN_SERVER_VERSION, naming what was found and where to get a newer one. */
export function requireSupportedServer(nc: NatsConnection): void {
  const version = nc.info?.version ?? "unknown";
  if (isSupportedVersion(version)) return;
  throw new AgentError(
    "UNSUPPORTED_SERVER",
    `nats-server ${version} at ${nc.getServer()} is older than ${MIN_SERVER_VERSION}, the oldest this runtime supports: run a newer one (${NEWER_SERVER_HINT})`,
  );
}
