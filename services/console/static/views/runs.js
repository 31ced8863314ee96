// The runs view: every run the status bucket holds, filtered by status, agent and runId, live.
import { api, badge, fmtTime, fmtUsd, h, notifyError } from "../dom.js";

const STATUSES = ["queued", "running", "awaiting_approval", "halted", "committed", "failed"];

function row(run) {
  const usage = run.usage ?? {};
  return h(
    "tr",
    { "data-run-id": run.runId, "data-status": run.status },
    h("td", {}, h("a", { href: `#/run/${encodeURIComponent(run.runId)}`, class: "mono" }, run.runId)),
    h("td", {}, run.agent ?? ""),
    h("td", {}, badge(run.status)),
    h("td", {}, run.phase),
    h("td", {}, String(run.iteration)),
    h("td", {}, `${(usage.inputTokens ?? 0) + (usage.outputTokens ?? 0)} tok · ${fmtUsd(usage.costUsd)}`),
    h("td", {}, run.parentRunId ? h("a", { href: `#/tree/${encodeURIComponent(run.runId)}` }, "child") : ""),
    h("td", { class: "muted" }, fmtTime(run.updatedAt)),
  );
}

export async function runsView(main) {
  const params = new URLSearchParams(sessionStorage.getItem("runsFilter") ?? "");
  const status = h(
    "select",
    { name: "status" },
    h("option", { value: "" }, "any status"),
    STATUSES.map((s) => h("option", { value: s }, s)),
  );
  const agent = h("input", { name: "agent", placeholder: "agent name", value: params.get("agent") ?? "" });
  const q = h("input", { name: "q", placeholder: "search runId", value: params.get("q") ?? "" });
  status.value = params.get("status") ?? "";
  const body = h("tbody");
  const count = h("span", { class: "muted" });
  main.append(
    h("h1", {}, "Runs"),
    h("div", { class: "filters" }, status, agent, q, count),
    h(
      "table",
      { class: "runs" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["run", "agent", "status", "phase", "iteration", "usage", "tree", "updated"].map((t) =>
            h("th", {}, t),
          ),
        ),
      ),
      body,
    ),
  );
  let timer;
  const load = async () => {
    const query = new URLSearchParams();
    if (status.value) query.set("status", status.value);
    if (agent.value.trim()) query.set("agent", agent.value.trim());
    if (q.value.trim()) query.set("q", q.value.trim());
    sessionStorage.setItem("runsFilter", query.toString());
    try {
      const { runs, more } = await api(`/runs?${query}`);
      body.replaceChildren(...runs.map(row));
      count.textContent = `${runs.length} run${runs.length === 1 ? "" : "s"}${more ? ` (${more} more not shown)` : ""}`;
    } catch (err) {
      notifyError(err);
    }
  };
  const soon = () => {
    clearTimeout(timer);
    timer = setTimeout(() => void load(), 200);
  };
  for (const input of [status, agent, q]) input.addEventListener("input", soon);
  // The feed first: a change between the first read and the feed's start would be missed. Read
  // again once it is listening (and after a reconnect), so nothing falls in between.
  const live = new EventSource("/api/live/runs");
  live.addEventListener("change", soon);
  live.addEventListener("ready", soon);
  await load();
  return () => {
    clearTimeout(timer);
    live.close();
  };
}
