/**
 * `npm run actor -- <supervisor|agent|critic|tools|mcp|console>`: starts one actor in this process, the same
 * entry point a container runs. Configuration comes from the environment (docs/configuration.md).
 */
import { pathToFileURL } from "node:url";
import { ACTOR_KINDS, actorEntry, type ActorKind } from "./cluster.js";

// The web console is an actor too, though not one every deployment runs.
const KINDS: readonly string[] = [...ACTOR_KINDS, "console"];
const kind = process.argv[2] ?? "";
if (!KINDS.includes(kind)) {
  process.stderr.write(
    `${JSON.stringify({ error: { code: "INVALID_INPUT", message: `usage: npm run actor -- <${KINDS.join("|")}>` } })}\n`,
  );
  process.exit(2);
}
await import(pathToFileURL(actorEntry(kind as ActorKind | "console")).href);
