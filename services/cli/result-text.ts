import { nextSteps, oneLine } from "./render.js";
import type { CommitArtifactView, FailureReportView, HaltRecordView, RunResult } from "./result.js";

/** Text longer than this is cut, saying how much was left out (`--json` has it whole). */
const MAX_TEXT = 2_000;

/** What `agentctl result` prints: the outcome's line, then what its artifact says, a section per part. */
export function resultLines(result: RunResult): string[] {
  const head = `${result.outcome}  ${result.reason}  (${result.runId}, ${result.at})`;
  if (result.source === "audit") return [head, ...fromAuditLines(result)];
  if (result.source === "status")
    return [
      head,
      "from its status alone: no WAL or closing audit event holds more (a child refused at its submit never ran; otherwise retention removed them)",
    ];
  const view = result.view;
  const body = !view
    ? ["(an artifact this build cannot read: --json prints it)"]
    : view.kind === "failure"
      ? failureLines(view)
      : view.kind === "commit"
        ? commitLines(view)
        : haltLines(result.runId, view);
  return [head, ...body, ...(result.artifactHash ? [`artifact sha256: ${result.artifactHash}`] : [])];
}

function failureLines(report: FailureReportView): string[] {
  const lines = [`diagnosis: ${report.diagnosis || "(none)"}`];
  lines.push(
    report.partialOutput ? `partial output:\n${cut(report.partialOutput)}` : "partial output: (none)",
  );
  if (report.compensations.length > 0) {
    lines.push(`compensations (${report.compensations.length}, most recent first):`);
    for (const c of report.compensations) {
      const how = c.ok ? `undone by ${c.tool}` : `not undone (${c.tool})${c.detail ? `: ${c.detail}` : ""}`;
      lines.push(`  ${c.actionId}  ${how}`);
    }
  } else lines.push("compensations: none (no completed call to undo)");
  if (report.manualIntervention.length > 0) {
    lines.push(`left to a human (${report.manualIntervention.length}): check what each call did`);
    for (const m of report.manualIntervention) lines.push(`  ${m.actionId}  ${m.tool}: ${m.reason}`);
  } else lines.push("left to a human: nothing");
  lines.push(`last checkpoint: ${report.lastCheckpoint ?? "none"}`);
  return lines;
}

/**
 * How much of a failure's diagnosis `watch` shows: all of a model's error (the provider's reply,
 * up to 500 characters, then the URL it came from), which is what tells a model not pulled or a
 * wrong `baseUrl` apart.
 */
const DIAGNOSIS_CHARS = 1_000;

/** What `watch` adds under a failed run's last line: why, and what is left to a human. */
export function failureSummary(result: RunResult): string[] {
  const report = result.source === "wal" && result.view?.kind === "failure" ? result.view : undefined;
  const diagnosis = report?.diagnosis ?? (result.source === "audit" ? result.diagnosis : undefined);
  const left =
    report?.manualIntervention.length ?? (result.source === "audit" ? result.needsHuman : undefined);
  return [
    ...(diagnosis ? [`diagnosis: ${oneLine(diagnosis, DIAGNOSIS_CHARS)}`] : []),
    ...(left
      ? [`${left} ${left === 1 ? "call" : "calls"} left to a human: \`agentctl result ${result.runId}\``]
      : []),
  ];
}

function commitLines(artifact: CommitArtifactView): string[] {
  const p = artifact.provenance;
  const byTool = new Map<string, number>();
  for (const call of p.toolInvocations) byTool.set(call.tool, (byTool.get(call.tool) ?? 0) + 1);
  const tools = [...byTool].map(([tool, n]) => `${tool} ×${n}`).join(", ");
  const failed = p.toolInvocations.filter((call) => call.ok === false).length;
  const omitted = p.toolInvocationsOmitted ? `, and ${p.toolInvocationsOmitted} before them` : "";
  const passed = p.verification.filter((v) => v.passed).length;
  const scores = p.scores
    ? Object.entries(p.scores)
        .map(([name, score]) => `${name} ${score}`)
        .join(", ")
    : "none (no critic)";
  return [
    `output:\n${cut(artifact.output)}`,
    `model: ${p.modelId ?? "none"}; started ${p.startedAt}, committed ${p.committedAt}`,
    `tool calls: ${p.toolInvocations.length}${tools ? ` (${tools})` : ""}${omitted}${failed > 0 ? `; ${failed} failed` : ""}`,
    `verifiers: ${passed} of ${p.verification.length} passed; critic scores: ${scores}`,
    p.repairHistory.length === 0
      ? "repairs: none"
      : `repairs (${p.repairHistory.length}): ${p.repairHistory.map((r) => `${r.strategy} (${oneLine(r.diagnosis)})`).join("; ")}`,
  ];
}

function haltLines(runId: string, record: HaltRecordView): string[] {
  return [
    `halted by ${record.by} in ${record.phase}; last checkpoint: ${record.lastCheckpoint ?? "none"}`,
    ...nextSteps({ runId, status: "halted" }),
  ];
}

function fromAuditLines(result: Extract<RunResult, { source: "audit" }>): string[] {
  const lines = [
    "from its closing event: its log holds no TERMINAL record (a run failed before a worker started it), so no artifact in full",
  ];
  if (result.diagnosis !== undefined) lines.push(`diagnosis: ${result.diagnosis || "(none)"}`);
  if (result.needsHuman !== undefined)
    lines.push(
      result.needsHuman === 0
        ? "left to a human: nothing"
        : `left to a human: ${result.needsHuman} calls (\`agentctl audit tail ${result.runId}\`: its compensation and tool events)`,
    );
  if (result.output !== undefined) lines.push(`output:\n${cut(result.output)}`);
  if (result.artifactHash) lines.push(`artifact sha256: ${result.artifactHash}`);
  return lines;
}

function cut(text: string): string {
  return text.length > MAX_TEXT
    ? `${text.slice(0, MAX_TEXT)}… (${text.length - MAX_TEXT} more characters: --json)`
    : text;
}
