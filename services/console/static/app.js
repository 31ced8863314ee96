// The console's page: a hash router over four views, and the operate login in the header.
import { api, notify, operator } from "./dom.js";
import { runsView } from "./views/runs.js";
import { runView } from "./views/run.js";
import { treeView } from "./views/tree.js";
import { clusterView } from "./views/cluster.js";

let leave = () => {};

/** The view the location's hash names: #/runs, #/run/<id>, #/tree/<id>, #/cluster. */
async function route() {
  leave();
  leave = () => {};
  notify("");
  const [, page = "runs", arg] = location.hash.split("/");
  for (const link of document.querySelectorAll("nav a"))
    link.classList.toggle("active", link.dataset.nav === (page === "cluster" ? "cluster" : "runs"));
  const main = document.getElementById("view");
  main.replaceChildren();
  const id = arg ? decodeURIComponent(arg) : "";
  const views = { runs: runsView, run: runView, tree: treeView, cluster: clusterView };
  leave = (await (views[page] ?? runsView)(main, id)) ?? (() => {});
}

async function showOperateState() {
  const state = document.getElementById("operate-state");
  try {
    const who = await api("/whoami");
    state.textContent = who.operate
      ? "operating"
      : who.operateConfigured
        ? "read only"
        : "read only (no operate token configured)";
    document.body.classList.toggle("can-operate", who.operate);
  } catch {
    state.textContent = "read only";
  }
}

document.getElementById("operator").value = operator.name;
document.getElementById("operate-token").value = operator.token;
document.getElementById("operate-login").addEventListener("submit", (e) => {
  e.preventDefault();
  operator.set(
    document.getElementById("operator").value.trim(),
    document.getElementById("operate-token").value.trim(),
  );
  void showOperateState().then(route);
});
window.addEventListener("hashchange", () => void route());
void showOperateState();
void route();
