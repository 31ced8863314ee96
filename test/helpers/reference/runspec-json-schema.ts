import { z } from "zod";
import { SubmitRequest } from "../../../shared/contracts/cluster.js";

type JsonSchema = Record<string, unknown>;

/**
 * The RunSpec as a JSON Schema (draft 2020-12), from the zod schema submits are checked with: what
 * an editor needs to complete and check a spec file (`docs/runspec.schema.json`). Objects take no
 * field they do not name, as the supervisor refuses one (see unknownFields); checks zod alone can
 * make (a critic needs a model or a check, convergence) are left to the submit.
 */
export function runSpecJsonSchema(): JsonSchema {
  const schema = z.toJSONSchema(SubmitRequest, { io: "input", unrepresentable: "any" }) as JsonSchema;
  closeObjects(schema);
  return { ...schema, title: "RunSpec" };
}

/** Every object that names its properties and says nothing of others takes no others. */
function closeObjects(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(closeObjects);
  if (node === null || typeof node !== "object") return;
  const schema = node as JsonSchema;
  if (schema.type === "object" && schema.properties !== undefined && !("additionalProperties" in schema))
    schema.additionalProperties = false;
  Object.values(schema).forEach(closeObjects);
}
