// The operate panel of a run: approve or reject a waiting run, halt, resume. Each asks the API,
// which goes through the supervisor's subjects as agentctl does.
import { api, h, notify, notifyError, operator } from "../dom.js";

async function act(runId, verb, reason) {
  const body = { by: operator.name || "console" };
  if (reason && verb !== "resume") body.reason = reason;
  try {
    const { message } = await api(`/operate/runs/${encodeURIComponent(runId)}/${verb}`, {
      method: "POST",
      body,
    });
    notify(message, true);
  } catch (err) {
    notifyError(err);
  }
}

/** The actions the run's status allows, as buttons with a reason field. */
export function operatePanel(run, keptReason = "") {
  const reason = h("input", {
    name: "reason",
    placeholder: "why (recorded in the audit)",
    size: 32,
    value: keptReason,
  });
  const button = (verb, label, cls) =>
    h(
      "button",
      { class: cls, "data-action": verb, onclick: () => void act(run.runId, verb, reason.value.trim()) },
      label,
    );
  const actions = [];
  if (run.status === "awaiting_approval")
    actions.push(button("approve", "Approve", "primary"), button("reject", "Reject", "danger"));
  if (["queued", "running", "awaiting_approval"].includes(run.status)) actions.push(button("halt", "Halt"));
  if (run.status === "halted") actions.push(button("resume", "Resume", "primary"));
  if (actions.length === 0) return h("p", { class: "muted" }, "nothing to operate: the run has ended");
  return h(
    "div",
    { class: "operate" },
    h("strong", {}, "Operate"),
    ...actions,
    reason,
    h("span", { class: "muted" }, `as ${operator.name || "console"}`),
  );
}
