import { z } from "zod";
import type { SubmitRequest } from "../../shared/contracts/cluster.js";
import type { SubmitReply } from "../../shared/contracts/control.js";
import { decode } from "../../shared/bus/codec.js";
import { childOf } from "../../shared/bus/fanout.js";
import { parseSubmitRequest } from "../../shared/bus/submit.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { specModels, type RunSpec } from "../../shared/contracts/run-spec.js";
import type { TreeCap } from "../../shared/bus/tree-iterations.js";
import { privacyRefusal } from "../../shared/models/factory.js";
import { unpricedModel, type PriceTable } from "../../shared/models/pricing.js";
import { contentHash } from "../../shared/runtime/hash.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { isGrantablePath } from "../../shared/tools/path-grant.js";

// What a submit asks for, read off the wire, and the replies it gets (see Admission).

/**
 * A model the run's privacy tier forbids would fail the run at its first call (or review), after
 * it took a pool slot: refused at the submit instead, saying which model and what to change.
 */
export function checkPrivacy(request: SubmitRequest): void {
  for (const [where, ref] of specModels(request)) {
    const refused = privacyRefusal(ref, request.agent.privacy);
    if (refused) throw new AgentError("PRIVACY_DENIED", `${where}: ${refused}`);
  }
}

/**
 * A run with a cost budget whose model has no price would spend without counting (every call at
 * $0), and its budget would bind nothing: refused at the submit, naming the model and the fix.
 */
export function checkPrices(request: SubmitRequest, prices: PriceTable): void {
  if (request.agent.resources.maxCostUsd <= 0) return;
  for (const [where, ref] of specModels(request)) {
    const refused = unpricedModel(ref, prices);
    if (refused) throw new AgentError("INVALID_SPEC", `${where}: ${refused}`, { details: { field: where } });
  }
}

/**
 * An `allowedPaths` entry that is neither absolute nor `"*"` (fileRead, fileWrite, mcp) grants
 * nothing, whatever its author meant by it: refused at the submit, naming each such field, so a
 * run is not started with a grant that refuses every path.
 */
export function checkGrantedPaths(request: SubmitRequest): void {
  const relative = request.agent.capabilities.flatMap((cap, i) =>
    "allowedPaths" in cap && cap.allowedPaths
      ? cap.allowedPaths.flatMap((entry, j) =>
          isGrantablePath(entry) ? [] : [`agent.capabilities[${i}].allowedPaths[${j}] '${entry}'`],
        )
      : [],
  );
  if (relative.length === 0) return;
  throw new AgentError(
    "INVALID_SPEC",
    `${relative.join(", ")}: an allowedPaths entry must be an absolute path or "*" (a relative one, or one starting with '~', grants nothing)`,
    { details: { fields: relative } },
  );
}

/** A root's cost and token budgets, which bound its whole tree (see TreeSpend). */
export function treeSpendOf(spec: RunSpec): Omit<TreeCap, "cap"> {
  const { maxCostUsd, maxTokensBudget } = spec.agent.resources;
  return {
    ...(maxCostUsd > 0 ? { maxCostUsd } : {}),
    ...(maxTokensBudget === undefined ? {} : { maxTokens: maxTokensBudget }),
  };
}

/**
 * The spec a submit asks for as its client sent it (canonical JSON: key order aside), its run id
 * and parent aside. Not as parsed: a retry that reaches a supervisor of another build, whose
 * RunSpec fills in other defaults, must still find the same spec.
 */
function specHash(raw: unknown): string {
  if (typeof raw !== "object" || raw === null) return contentHash(raw);
  const { parent: _parent, runId: _runId, ...spec } = raw as Record<string, unknown>;
  return contentHash(spec);
}

/** Not JSON is INVALID_INPUT; JSON that is not a valid RunSpec, or has fields it does not know, is INVALID_SPEC. */
export function parseSubmit(data: Uint8Array): { request: SubmitRequest; specHash: string } {
  const raw = decode(z.unknown(), data);
  return { request: parseSubmitRequest(raw), specHash: specHash(raw) };
}

export function existing(runId: string): SubmitReply {
  return { schemaVersion: 1, ok: true, runId, status: "existing" };
}

export function rejected(error: AgentError): SubmitReply {
  return {
    schemaVersion: 1,
    ok: false,
    error: {
      code: error.code,
      message: error.message,
      ...(error.details !== undefined ? { details: error.details } : {}),
    },
  };
}

/**
 * A spawned child naming an existing run that is not its parent's: a model's spawn may name its
 * children's ids, and answered `existing` its parent took another tree's run for its child (see
 * childOf). Refused, without an event in that run's trail; the fan-in tells the parent so.
 */
export function notParentOf(known: RunStatus, parentRunId: string): AgentError | undefined {
  if (childOf(known, parentRunId)) return undefined;
  return new AgentError(
    "RUN_ID_TAKEN",
    `run ${known.runId} exists and is not a child of ${parentRunId}: a spawned child's runId must name a new run`,
  );
}
