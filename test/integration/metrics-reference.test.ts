import type { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { registerStoreGauges } from "../../services/supervisor/store-gauges.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { useActorBus } from "../helpers/actor-bus.js";

const suite = useActorBus("metrics-ref");

/** What prom-client keeps of a metric that the reference shows. */
interface Described {
  name: string;
  help: string;
  type: string;
  labelNames?: readonly string[];
}

/** The page's section on the dashboard (test/unit/dashboard.test.ts checks the dashboard itself). */
const DASHBOARD = [
  "## The Grafana dashboard",
  "",
  "[`deploy/k8s/components/monitoring/dashboard.json`](../deploy/k8s/components/monitoring/dashboard.json)",
  "shows these metrics in Grafana, a row each: **runs** (admitted and refused by code, pool slots by",
  "status, jobs waiting, the critic's pass rate), **steps and latency** (steps per second by worker, the",
  "p50 and p95 wait on each effect, guard trips by reason), **tools and critic** (calls by tool and",
  "outcome, verdicts, waits for a service, refused requests), **model providers** (breakers opened,",
  "turns refused, runs left waiting), **durability** (redeliveries, fencing conflicts, failed leases by",
  "code, lost admissions, orphans, retention), **JetStream** (storage against its limit, current copies",
  "of each store against its replicas, answering by actor) and **processes** (CPU, memory and event-loop",
  "lag of each actor). Its variables pick the Prometheus data source and the namespaces (all by default).",
  "",
  "The monitoring component ([Deploying](deploying.md)) ships it as the ConfigMap",
  '`bounded-agents-dashboard`, labelled `grafana_dashboard: "1"` and annotated',
  "`grafana_folder: bounded-agents`: the dashboard sidecar of kube-prometheus-stack's Grafana loads it",
  "(give the sidecar `searchNamespace: ALL`, or the namespace of your overlay, when Grafana runs",
  "elsewhere). Without the sidecar, import the JSON file (Dashboards → New → Import). Every expression",
  "reads only series the actors export, and parses (`test/unit/dashboard.test.ts`, with `promtool`).",
  "",
];

/** The runtime's own metrics (not Node's defaults) as a Markdown table, sorted by name. */
async function reference(registry: Registry): Promise<string> {
  const metrics = registry
    .getMetricsAsArray()
    .map((m) => m as unknown as Described)
    .filter((m) => m.name.startsWith("agents_"))
    .sort((a, b) => a.name.localeCompare(b.name));
  const type = async (name: string) => (await registry.getSingleMetric(name)?.get())?.type ?? "?";
  const rows = await Promise.all(
    metrics.map(async (m) => {
      const labels = ["actor", ...(m.labelNames ?? [])].map((l) => `\`${l}\``).join(", ");
      return `| \`${m.name}\` | ${await type(m.name)} | ${labels} | ${m.help} |`;
    }),
  );
  return [
    "# Metrics",
    "",
    "Every actor serves `/metrics` (Prometheus text). The runtime's own metrics, generated from their",
    "definitions (`shared/runtime/metrics.ts`, and the supervisor's store gauges in",
    "`services/supervisor/store-gauges.ts`) by `test/integration/metrics-reference.test.ts`, which",
    "fails when this page is stale (`-u` writes it anew). Each actor also exports Node's default",
    "process metrics. See [Running a cluster](running-a-cluster.md) for what each is for.",
    "",
    "| metric | type | labels | help |",
    "| --- | --- | --- | --- |",
    ...rows,
    "",
    ...DASHBOARD,
  ].join("\n");
}

describe("docs/metrics.md", () => {
  it("lists every metric the runtime defines, as the code defines it", async () => {
    const metrics = new ActorMetrics("reference");
    await registerStoreGauges(suite.bus, metrics.registry);
    const page = await reference(metrics.registry);
    expect(page).toMatch(/\| `agents_steps_total` \| counter \|/);
    expect(page).toMatch(/\| `agents_store_replicas` \| gauge \| `actor`, `store` \|/);
    await expect(page).toMatchFileSnapshot("../../docs/metrics.md");
  });
});
