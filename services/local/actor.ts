/**
 * `npm run actor -- <supervisor|agent|critic|tools|mcp>`: starts one actor in this process, the same
 * entry point a container runs. Configuration comes from the environment (docs/configuration.md).
 */
import { pathToFileURL } from "node:url";
import { ACTOR_KINDS, actorEntry, type ActorKind } from "./cluster.js";

const KINDS: readonly string[] = ACTOR_KINDS;
const kind = process.argv[2] ?? "";
if (!KINDS.includes(kind)) {
  process.stderr.write(
    `${JSON.stringify({ error: { code: "INVALID_INPUT", message: `usage: npm run actor -- <${KINDS.join("|")}>` } })}\n`,
  );
  process.exit(2);
}
await import(pathToFileURL(actorEntry(kind as ActorKind)).href);
