import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { Histogram, Summary } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { ActorBus } from "../../shared/bus/actor.js";
import { registerStoreGauges } from "../../services/supervisor/store-gauges.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { MONITORING } from "../helpers/alert-rules.js";
import { K8S, kubectlAvailable, kustomize, readYaml } from "../helpers/k8s.js";

interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: { refId: string; expr: string; legendFormat?: string; datasource?: { uid: string } }[];
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: unknown }[] };
}

const FILE = join(MONITORING, "dashboard.json");
const dashboard = JSON.parse(readFileSync(FILE, "utf8")) as Dashboard;
const panels = dashboard.panels.filter((p) => p.type !== "row");
const expressions = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));

/** Grafana's variables, as Prometheus would see them after Grafana replaced them. */
const asQueried = (expr: string): string =>
  expr
    .replaceAll("$__rate_interval", "2m")
    .replaceAll("$__range", "6h")
    .replaceAll("$__interval", "30s")
    .replaceAll("$namespace", ".*");

const FUNCTIONS_AND_KEYWORDS = new Set(
  [
    "sum min max avg count stddev stdvar topk bottomk quantile count_values group",
    "rate irate increase delta idelta deriv histogram_quantile label_replace label_join abs clamp_min clamp_max",
    "by without on ignoring group_left group_right and or unless bool offset inf nan",
  ].flatMap((line) => line.split(" ")),
);

/** The series names an expression reads: every identifier left once strings, matchers, ranges and groupings are gone. */
function metricsIn(expr: string): string[] {
  const bare = asQueried(expr)
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "");
  const names = bare.match(/[A-Za-z_:][A-Za-z0-9_:]*/g) ?? [];
  return [...new Set(names.filter((name) => !FUNCTIONS_AND_KEYWORDS.has(name)))];
}

/** Every series name an actor's /metrics can show: the runtime's metrics, the supervisor's store gauges and Node's defaults. */
let exported: Set<string>;
beforeAll(async () => {
  const metrics = new ActorMetrics("dashboard");
  // The store gauges read JetStream at a scrape only: a connection that is never asked is enough to register them.
  const neverAsked = { nc: { options: { inboxPrefix: "_INBOX" } } } as unknown as ActorBus;
  await registerStoreGauges(neverAsked, metrics.registry);
  // Their definitions, not their values (reading those would scrape).
  exported = new Set(
    metrics.registry.getMetricsAsArray().flatMap((m) => {
      const { name } = m as unknown as { name: string };
      if (m instanceof Histogram) return [`${name}_bucket`, `${name}_sum`, `${name}_count`];
      if (m instanceof Summary) return [name, `${name}_sum`, `${name}_count`];
      return [name];
    }),
  );
});

const work = mkdtempSync(join(tmpdir(), "dashboard-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const promtool = spawnSync("promtool", ["--version"]).status === 0;
// As for the alert rules: CI installs promtool, and there its absence is a failure, not a skip.
const withPromtool = promtool || process.env.CI ? it : it.skip;
const render = kubectlAvailable() ? it : it.skip;
if (!promtool)
  console.warn("\n*** promtool is not on PATH: the dashboard's expressions are NOT parsed in this run ***\n");
if (!kubectlAvailable())
  console.warn("\n*** kubectl is not on PATH: the dashboard's ConfigMap is NOT rendered in this run ***\n");

describe("deploy/k8s/components/monitoring/dashboard.json: the Grafana dashboard", () => {
  it("is a dashboard of Prometheus panels on the datasource and namespace it asks for, laid out without overlaps", () => {
    expect(dashboard).toMatchObject({ uid: "bounded-agents", title: "bounded-agents" });
    expect(dashboard.templating.list.map((v) => [v.name, v.type])).toEqual([
      ["datasource", "datasource"],
      ["namespace", "query"],
    ]);
    expect(panels.length).toBeGreaterThanOrEqual(20);
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    for (const panel of panels) {
      expect(panel.datasource, panel.title).toEqual({ type: "prometheus", uid: "${datasource}" });
      expect(panel.description, panel.title).toBeTruthy();
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) {
        expect(target.datasource?.uid, panel.title).toBe("${datasource}");
        // Every series is read within the namespace chosen (all of them by default).
        for (const name of metricsIn(target.expr))
          expect(target.expr, `${panel.title}: ${name} outside the namespace`).toContain(
            `${name}{namespace=~"$namespace"`,
          );
      }
    }
    const cells = new Set<string>();
    for (const panel of dashboard.panels) {
      const { x, y, w, h } = panel.gridPos;
      expect(x + w, panel.title).toBeLessThanOrEqual(24);
      for (let row = y; row < y + h; row++)
        for (let col = x; col < x + w; col++) {
          const cell = `${row}:${col}`;
          expect(cells.has(cell), `${panel.title} overlaps at ${cell}`).toBe(false);
          cells.add(cell);
        }
    }
  });

  it("every expression names only metrics the code registers", () => {
    expect(exported.has("agents_steps_total")).toBe(true);
    expect(exported.has("agents_phase_seconds_bucket")).toBe(true);
    expect(exported.has("agents_jobs_waiting")).toBe(true);
    const read = new Set<string>();
    for (const { panel, expr } of expressions) {
      const names = metricsIn(expr);
      expect(names.length, `${panel}: ${expr}`).toBeGreaterThan(0);
      for (const name of names) {
        expect(exported.has(name), `${panel} reads ${name}, which no actor exports`).toBe(true);
        read.add(name);
      }
    }
    // The check itself: a name the code does not register is caught.
    expect(metricsIn('sum(rate(agents_steps_totl{namespace=~"$namespace"}[$__rate_interval]))')).toEqual([
      "agents_steps_totl",
    ]);
    expect(read.size).toBeGreaterThanOrEqual(25);
  });

  withPromtool(
    "promtool parses every expression (as recording rules, once Grafana's variables are replaced)",
    () => {
      const rules = {
        groups: [
          {
            name: "dashboard",
            rules: expressions.map(({ expr }, i) => ({
              record: `dashboard:expr_${i}`,
              expr: asQueried(expr),
            })),
          },
        ],
      };
      writeFileSync(join(work, "dashboard-rules.yaml"), stringify(rules));
      let out: string;
      try {
        out = execFileSync("promtool", ["check", "rules", "dashboard-rules.yaml"], {
          cwd: work,
          encoding: "utf8",
          stdio: "pipe",
        });
      } catch (err) {
        const { stdout, stderr } = err as { stdout: string; stderr: string };
        throw new Error(`promtool check rules failed:\n${stdout}${stderr}`, { cause: err });
      }
      expect(out).toContain(`SUCCESS: ${expressions.length} rules found`);
    },
  );

  render(
    "ships as a ConfigMap with the grafana_dashboard label, beside the alert rules in the monitoring component",
    () => {
      const component = readYaml(join(MONITORING, "kustomization.yaml"))[0] as {
        configMapGenerator: { name: string; files: string[] }[];
      };
      expect(component.configMapGenerator.map((g) => g.files)).toEqual([["dashboard.json"]]);
      // Rendered as an overlay taking the component in would render it.
      const overlay = mkdtempSync(join(work, "overlay-"));
      const base = relative(overlay, join(K8S, "base"));
      const monitoring = relative(overlay, MONITORING);
      writeFileSync(
        join(overlay, "kustomization.yaml"),
        stringify({
          apiVersion: "kustomize.config.k8s.io/v1beta1",
          kind: "Kustomization",
          namespace: "agents-monitored",
          resources: [base],
          components: [monitoring],
        }),
      );
      const objects = kustomize(overlay) ?? [];
      const maps = objects.filter(
        (o) => o.kind === "ConfigMap" && o.metadata.labels?.grafana_dashboard === "1",
      ) as unknown as { metadata: { name: string; namespace: string }; data: Record<string, string> }[];
      expect(maps).toHaveLength(1);
      expect(maps[0]?.metadata).toMatchObject({
        name: "bounded-agents-dashboard",
        namespace: "agents-monitored",
      });
      expect(JSON.parse(maps[0]?.data["dashboard.json"] ?? "null")).toEqual(dashboard);
      expect(objects.map((o) => o.kind)).toEqual(expect.arrayContaining(["PodMonitor", "PrometheusRule"]));
    },
  );
});
