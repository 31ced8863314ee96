// A run tree: the root and its descendants with their states, nested.
import { api, badge, h, notifyError } from "../dom.js";

export async function treeView(main, runId) {
  try {
    const { rootRunId, runs } = await api(`/runs/${encodeURIComponent(runId)}/tree`);
    const children = new Map();
    for (const run of runs) {
      if (run.runId === rootRunId || !run.parentRunId) continue;
      children.set(run.parentRunId, [...(children.get(run.parentRunId) ?? []), run]);
    }
    const node = (run) =>
      h(
        "li",
        { "data-run-id": run.runId },
        h("a", { href: `#/run/${encodeURIComponent(run.runId)}`, class: "mono" }, run.runId),
        " ",
        badge(run.status),
        h("span", { class: "muted" }, ` ${run.agent ?? ""} · ${run.phase} · depth ${run.depth ?? 0}`),
        children.has(run.runId) ? h("ul", {}, children.get(run.runId).map(node)) : null,
      );
    const root = runs.find((r) => r.runId === rootRunId);
    main.append(
      h("h1", {}, "Run tree of ", h("code", {}, rootRunId)),
      h("ul", { class: "tree" }, root ? node(root) : null),
    );
  } catch (err) {
    notifyError(err);
  }
}
