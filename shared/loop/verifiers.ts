import { Ajv, type ValidateFunction } from "ajv";
import type { Defect, Verifier } from "../contracts/rubric.js";
import { canonicalJson } from "../runtime/canonical-json.js";

export interface VerifierResult {
  index: number;
  kind: Verifier["kind"];
  passed: boolean;
  message: string;
}

const ajv = new Ajv({ allErrors: true, strict: false });
const compiled = new Map<string, ValidateFunction>();

function validatorFor(schema: Record<string, unknown>): ValidateFunction {
  const key = canonicalJson(schema);
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(key, validate);
  }
  return validate;
}

/** Runs a verifier that needs no I/O; `tool` verifiers return undefined (they are effects). */
export function evaluatePureVerifier(
  verifier: Verifier,
  index: number,
  output: string,
): VerifierResult | undefined {
  const result = (passed: boolean, message: string): VerifierResult => ({
    index,
    kind: verifier.kind,
    passed,
    message,
  });
  switch (verifier.kind) {
    case "nonEmpty":
      return output.trim() === "" ? result(false, "output is empty") : result(true, "output is not empty");
    case "regex": {
      let pattern: RegExp;
      try {
        pattern = new RegExp(verifier.pattern, verifier.flags);
      } catch {
        return result(false, `invalid pattern /${verifier.pattern}/`);
      }
      return pattern.test(output)
        ? result(true, `output matches /${verifier.pattern}/`)
        : result(false, `output does not match /${verifier.pattern}/`);
    }
    case "jsonSchema":
      return checkJsonSchema(verifier.schema, output, result);
    case "tool":
      return undefined;
  }
}

function checkJsonSchema(
  schema: Record<string, unknown>,
  output: string,
  result: (passed: boolean, message: string) => VerifierResult,
): VerifierResult {
  let value: unknown;
  try {
    value = JSON.parse(output) as unknown;
  } catch {
    return result(false, "output is not valid JSON");
  }
  let validate: ValidateFunction;
  try {
    validate = validatorFor(schema);
  } catch (err) {
    return result(false, `invalid JSON Schema: ${(err as Error).message}`);
  }
  return validate(value)
    ? result(true, "output matches the JSON Schema")
    : result(false, `output violates the JSON Schema: ${ajv.errorsText(validate.errors)}`);
}

/** Whether a tool verifier's output meets its `expect` (any success when `expect` is absent). */
export function toolVerifierPassed(verifier: Extract<Verifier, { kind: "tool" }>, output: unknown): boolean {
  if (verifier.expect === undefined) return true;
  return canonicalJson(output) === canonicalJson(verifier.expect);
}

const ROOT_CAUSE: Record<Verifier["kind"], Defect["rootCause"]> = {
  nonEmpty: "incompleteness",
  regex: "schemaViolation",
  jsonSchema: "schemaViolation",
  tool: "toolFailure",
};

/** Failed verifiers, as defects the repair step can act on. */
export function verifierDefects(results: readonly VerifierResult[]): Defect[] {
  return results
    .filter((r) => !r.passed)
    .map((r) => ({
      severity: r.kind === "nonEmpty" ? "high" : "medium",
      rootCause: ROOT_CAUSE[r.kind],
      location: `verifier[${r.index}]`,
      description: r.message,
    }));
}
