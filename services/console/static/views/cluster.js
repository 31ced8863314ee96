// The cluster: the kill switch (and its toggle), supervisors, critics, tools, workers, stores,
// open model breakers and what needs an operator: what agentctl cluster and breakers show.
import { api, fmtTime, h, notify, notifyError, operator } from "../dom.js";

const list = (title, rows) =>
  h(
    "div",
    { class: "card", "data-card": title },
    h("h3", {}, title),
    rows.length
      ? h(
          "ul",
          {},
          rows.map((r) => h("li", {}, r)),
        )
      : h("p", { class: "muted" }, "none"),
  );

function killSwitch(state, reload) {
  const reason = h("input", { name: "killswitch-reason", placeholder: "why", size: 24 });
  const toggle = h(
    "button",
    {
      class: state.active ? "primary" : "danger",
      "data-action": "killswitch",
      onclick: async () => {
        try {
          const body = { active: !state.active, by: operator.name || "console" };
          if (reason.value.trim()) body.reason = reason.value.trim();
          notify((await api("/operate/killswitch", { method: "POST", body })).message, true);
          await reload();
        } catch (err) {
          notifyError(err);
        }
      },
    },
    state.active ? "Lift the kill switch" : "Engage the kill switch",
  );
  const who = state.by ? ` by ${state.by}${state.reason ? ` (${state.reason})` : ""}` : "";
  return h(
    "div",
    { class: "operate", "data-killswitch": state.active ? "on" : "off" },
    h("strong", {}, "Kill switch "),
    h("span", { class: `badge ${state.active ? "failed" : "committed"}` }, state.active ? "ON" : "off"),
    who,
    toggle,
    reason,
  );
}

export async function clusterView(main) {
  const load = async () => {
    try {
      const { health, breakers } = await api("/cluster");
      main.replaceChildren(
        h("h1", {}, "Cluster"),
        killSwitch(health.killSwitch, load),
        h("h2", {}, "Needs an operator"),
        health.problems.length
          ? h(
              "ul",
              { class: "problems" },
              health.problems.map((p) => h("li", { class: "fail" }, p)),
            )
          : h("p", { class: "pass" }, "nothing: healthy"),
        h(
          "div",
          { class: "cards" },
          list(
            "supervisors",
            (health.supervisors.supervisors ?? []).map(
              (s) => `${s.instance} · pool ${s.poolCapacity} · depth ${s.maxDepth}`,
            ),
          ),
          list(
            "critics",
            (health.critics.critics ?? []).map((c) => `${c.instance}`),
          ),
          list(
            "workers",
            (health.workers.workers ?? []).map((w) => `${w.workerId}${w.leaving ? " (leaving)" : ""}`),
          ),
          list(
            "tools",
            (health.tools.tools ?? []).map((t) => `${t.name}${t.answered ? "" : " (did not answer)"}`),
          ),
          list(
            "model breakers",
            breakers.map(
              (b) =>
                `${b.provider}: ${b.state ?? "open"} since ${fmtTime(new Date(b.openedAt).toISOString())} · ${b.waitingRuns} runs waiting`,
            ),
          ),
        ),
        h("h2", {}, "Streams and buckets"),
        h(
          "table",
          {},
          h(
            "tr",
            {},
            ["store", "kind", "messages", "replicas", "copies behind or down"].map((t) => h("th", {}, t)),
          ),
          (health.stores ?? []).map((s) =>
            h(
              "tr",
              {},
              h("td", { class: "mono" }, s.name),
              h("td", {}, s.kind),
              h("td", {}, String(s.messages ?? "missing")),
              h("td", {}, String(s.replicas ?? "")),
              h("td", {}, String((s.followers ?? []).filter((f) => !f.current || f.offline).length)),
            ),
          ),
        ),
        h("p", { class: "muted" }, `jobs waiting: ${health.jobs?.waiting ?? "?"}`),
      );
    } catch (err) {
      notifyError(err);
    }
  };
  main.append(h("p", { class: "muted" }, "asking the cluster…"));
  await load();
}
