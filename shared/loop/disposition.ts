import { assessConfidence, reviewData, type Assessment } from "./confidence.js";
import type { Draft } from "./draft.js";
import { requestApproval } from "./human-review.js";
import type { PolicyDecision } from "./policy.js";
import { commit } from "./terminal.js";

const DISPOSITION_STATUS = { commit: "passed", review: "started", repair: "failed" } as const;

/**
 * What a policy's decision leads to, wherever the policy is consulted (VERIFY, or a policy that
 * converges mid-ACT): with `task.exit`, the candidate's confidence picks commit, a human's review
 * or a repair; a spec that requires approval waits for it before any commit. `settled`: the run
 * committed or waits for a human; otherwise it goes on, with the assessment for the repair.
 */
export function settleDecision(
  d: Draft,
  decision: PolicyDecision,
  policy: string,
): { settled: true } | { settled: false; assessed: Assessment | undefined } {
  const s = d.state;
  const assessed = assessConfidence(s, decision.converged);
  if (assessed) {
    d.audit("confidence.assessed", DISPOSITION_STATUS[assessed.disposition], { data: { ...assessed } });
  }
  const disposition = assessed?.disposition ?? (decision.converged ? "commit" : "repair");
  if (disposition === "commit") {
    if (s.spec.task.requiresApproval) requestApproval(d, "commit", decision.reason, { policy });
    else commit(d, decision.reason, policy);
    return { settled: true };
  }
  if (disposition === "review" && assessed) {
    const reason = `confidence ${assessed.confidence} is below autoCommitAt ${assessed.autoCommitAt}`;
    requestApproval(d, "commit", reason, { ...reviewData(s, assessed.confidence, "confidence"), policy });
    return { settled: true };
  }
  return { settled: false, assessed };
}
