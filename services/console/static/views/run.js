// A run's view: status, operate panel, usage against budgets, timeline, provenance; live.
import { api, badge, fmtTime, fmtUsd, h, notifyError } from "../dom.js";
import { operatePanel } from "./operate.js";

function budgets(list) {
  if (list.length === 0) return h("p", { class: "muted" }, "no usage yet");
  return h(
    "div",
    { class: "cards" },
    list.map((b) =>
      h(
        "div",
        { class: "card", "data-budget": b.name },
        h("h3", {}, b.name),
        b.limit === undefined || b.limit === null
          ? h("div", {}, `${b.name === "costUsd" ? fmtUsd(b.used) : b.used} (unlimited)`)
          : h(
              "div",
              {},
              h("meter", { min: 0, max: b.limit, value: b.used, high: b.limit * 0.8 }),
              ` ${b.name === "costUsd" ? fmtUsd(b.used) : b.used} / ${b.limit}`,
            ),
      ),
    ),
  );
}

function scores(s) {
  return h(
    "table",
    { class: "scores" },
    h(
      "tr",
      {},
      ["dimension", "score", "min", "weight"].map((t) => h("th", {}, t)),
    ),
    s.rows.map((r) =>
      h(
        "tr",
        { class: r.passed ? "pass" : "fail", "data-dimension": r.name },
        h("td", {}, r.name),
        h("td", {}, r.score === null ? "–" : r.score.toFixed(2)),
        h("td", {}, r.min.toFixed(2)),
        h("td", {}, r.weight.toFixed(2)),
      ),
    ),
    s.threshold === null
      ? null
      : h("tr", {}, h("td", { colspan: 4, class: "muted" }, `threshold ${s.threshold}`)),
  );
}

function item(e) {
  const detail = [];
  if (e.tool)
    detail.push(
      h(
        "div",
        { class: "tool" },
        h("div", {}, h("strong", {}, "tool "), h("code", { "data-tool": e.tool.name }, e.tool.name)),
        e.tool.input === undefined
          ? null
          : h("div", {}, "input ", h("code", { class: "tool-input" }, e.tool.input)),
        e.tool.output === undefined
          ? null
          : h("div", {}, "output ", h("code", { class: "tool-output" }, e.tool.output)),
        e.tool.error === undefined ? null : h("div", { class: "fail" }, e.tool.error),
      ),
    );
  if (e.scores) detail.push(scores(e.scores));
  return h(
    "tr",
    { "data-kind": e.kind, "data-seq": e.seq },
    h("td", { class: "muted" }, String(e.seq)),
    h("td", { class: "muted at" }, fmtTime(e.timestamp)),
    h("td", { class: "kind" }, h("code", {}, e.kind), " ", badge(e.status)),
    h("td", {}, e.phase, h("span", { class: "muted" }, ` #${e.iteration}`)),
    h("td", {}, e.actor),
    h("td", {}, e.tool ? null : h("div", { class: "mono" }, e.summary), ...detail),
  );
}

function render(main, view) {
  const status = view.status;
  // A re-render while the operator types keeps what they typed.
  const keptReason = main.querySelector('input[name="reason"]')?.value ?? "";
  const parts = [
    h("h1", {}, "Run ", h("code", {}, view.runId), " ", status ? badge(status.status) : badge("unknown")),
    h(
      "p",
      {},
      h("strong", {}, "agent "),
      view.agent ?? "?",
      status
        ? ` · phase ${status.phase} · iteration ${status.iteration} · updated ${fmtTime(status.updatedAt)}`
        : "",
      " · ",
      h("a", { href: `#/tree/${encodeURIComponent(view.runId)}` }, "run tree"),
    ),
    view.prompt ? h("p", {}, h("strong", {}, "task "), view.prompt) : null,
    status ? operatePanel(status, keptReason) : null,
    status?.terminal
      ? h("p", { class: "terminal" }, h("strong", {}, `${status.terminal.kind}: `), status.terminal.reason)
      : null,
    view.output ? h("p", {}, h("strong", {}, "output "), h("code", { class: "output" }, view.output)) : null,
    h("h2", {}, "Usage against budgets"),
    budgets(view.budgets),
    h("h2", {}, `Timeline (${view.timeline.length} events)`),
    // The API sends the newest events only: a long run's page says how many came before.
    view.more > 0
      ? h("p", { class: "muted", "data-more": view.more }, `${view.more} earlier events not shown`)
      : null,
    h(
      "table",
      { class: "timeline" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["seq", "at", "event", "phase", "actor", "what"].map((t) => h("th", {}, t)),
        ),
      ),
      h("tbody", {}, view.timeline.map(item)),
    ),
    view.provenance === undefined
      ? null
      : [
          h("h2", {}, "Provenance"),
          h("pre", { class: "mono provenance" }, JSON.stringify(view.provenance, null, 2)),
        ],
  ];
  main.replaceChildren(...parts.flat().filter(Boolean));
}

export async function runView(main, runId) {
  let timer;
  let shown = "";
  const load = async () => {
    try {
      const view = await api(`/runs/${encodeURIComponent(runId)}`);
      const text = JSON.stringify(view);
      if (text === shown) return;
      shown = text;
      render(main, view);
    } catch (err) {
      notifyError(err);
    }
  };
  // Its first event is the run's status now: a step taken while the page loaded is not missed.
  await load();
  const live = new EventSource(`/api/live/runs/${encodeURIComponent(runId)}`);
  live.addEventListener("status", () => {
    clearTimeout(timer);
    timer = setTimeout(() => void load(), 150);
  });
  return () => {
    clearTimeout(timer);
    live.close();
  };
}
