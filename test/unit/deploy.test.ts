import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { ActorEnv } from "../../shared/runtime/config.js";
import { CriticEnv } from "../../services/critic/env.js";
import { AgentEnv } from "../../services/agent/env.js";
import { ACTOR_KINDS, NATS_USERS, type LocalActorKind } from "../../services/local/cluster.js";
import { TradingExecutorEnv } from "../../services/trading-executor/env.js";
import { SupervisorEnv } from "../../services/supervisor/env.js";
import { ToolsEnv } from "../../services/tools/env.js";
import {
  K8S,
  ROOT,
  kubectlAvailable,
  kustomize,
  podSpecOf,
  readYaml,
  validateObject,
  type K8sObject,
} from "../helpers/k8s.js";

const ENVS: Record<LocalActorKind, z.ZodObject> = {
  supervisor: SupervisorEnv,
  agent: AgentEnv,
  critic: CriticEnv,
  tools: ToolsEnv,
  "trading-executor": TradingExecutorEnv,
  "trading-planner": ActorEnv,
};
/** Created outside git in production (see the prod overlay); model keys are optional. */
const EXTERNAL_SECRETS = ["nats-credentials", "model-api-keys"];
const IMAGE = "bounded-agents";

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(entry.name) ? [path] : [];
  });
}

interface Kustomization {
  resources: string[];
  configMapGenerator?: { name: string; literals?: string[]; files?: string[] }[];
  images?: { name: string }[];
}
const base = readYaml(join(K8S, "base", "kustomization.yaml"))[0] as Kustomization;
const baseObjects = base.resources.flatMap((file) => readYaml(join(K8S, "base", file)) as K8sObject[]);
const actorDeployments = baseObjects.filter(
  (o) => o.kind === "Deployment" && o.metadata.labels?.["app.kubernetes.io/component"] === "actor",
);
const sharedEnv = (base.configMapGenerator ?? [])
  .find((g) => g.name === "agents-env")
  ?.literals?.map((line) => line.split("=")[0] ?? "");

/** What every actor Deployment must have, wherever it is rendered. */
function checkActor(deployment: K8sObject, image: string): void {
  const kind = deployment.metadata.name as LocalActorKind;
  const pod = podSpecOf(deployment);
  expect(pod.securityContext?.runAsNonRoot, kind).toBe(true);
  expect(pod.containers, kind).toHaveLength(1);
  const [container] = pod.containers;
  if (!container) return;
  expect(container.image, kind).toBe(image);
  expect(container.args, kind).toEqual([`dist/services/${kind}/main.js`]);
  expect(existsSync(join(ROOT, "dist", "services", kind, "main.js")), kind).toBe(true);
  expect(container.livenessProbe?.httpGet, kind).toEqual({ path: "/healthz", port: "health" });
  expect(container.readinessProbe?.httpGet, kind).toEqual({ path: "/readyz", port: "health" });
  expect(container.ports, kind).toContainEqual({ name: "health", containerPort: 8080 });
  for (const need of ["cpu", "memory"]) {
    expect(container.resources?.requests?.[need], `${kind} requests ${need}`).toBeDefined();
    expect(container.resources?.limits?.[need], `${kind} limits ${need}`).toBeDefined();
  }
  expect(container.securityContext, kind).toMatchObject({
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ["ALL"] },
  });
  const annotations = (deployment.spec as { template: { metadata: K8sObject["metadata"] } }).template.metadata
    .annotations;
  expect(annotations, kind).toMatchObject({ "prometheus.io/scrape": "true", "prometheus.io/port": "8080" });
  // Every variable the manifest sets is one the actor reads (a typo would be silently ignored).
  const known = Object.keys(ENVS[kind].shape);
  for (const variable of container.env ?? [])
    expect(known, `${kind} sets ${variable.name}`).toContain(variable.name);
  const env = new Map((container.env ?? []).map((v) => [v.name, v]));
  expect(env.get("NATS_USER")?.value, kind).toBe(NATS_USERS[kind].user);
  expect(env.get("NATS_PASSWORD")?.valueFrom?.secretKeyRef, kind).toEqual({
    name: expect.stringMatching(/^nats-credentials/) as unknown,
    key: NATS_USERS[kind].user,
  });
}

describe("deploy/: the image and the Kubernetes manifests", () => {
  it("every YAML file parses, and every base object is valid against the Kubernetes schemas", () => {
    const files = yamlFiles(K8S);
    expect(files.length).toBeGreaterThanOrEqual(9);
    for (const file of files) expect(() => readYaml(file), relative(ROOT, file)).not.toThrow();
    for (const object of baseObjects) validateObject(object);
    expect(new Set(baseObjects.map((o) => o.kind))).toEqual(
      new Set([
        "Namespace",
        "StatefulSet",
        "Service",
        "PodDisruptionBudget",
        "Deployment",
        "ScaledObject",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
      ]),
    );
  });

  it("one Deployment per actor kind, each with probes, resources, a locked-down securityContext and its own NATS user", () => {
    expect(actorDeployments.map((d) => d.metadata.name).sort()).toEqual([...ACTOR_KINDS].sort());
    expect(base.images?.map((i) => i.name)).toEqual([IMAGE]);
    for (const deployment of actorDeployments) checkActor(deployment, IMAGE);
    for (const name of sharedEnv ?? []) expect(Object.keys(ActorEnv.shape), name).toContain(name);
    expect(sharedEnv).toContain("HEALTH_HOST");
  });

  it("every actor and NATS has a PodDisruptionBudget; critic and tools an HPA; agents a KEDA ScaledObject", () => {
    const pdbs = baseObjects.filter((o) => o.kind === "PodDisruptionBudget").map((o) => o.metadata.name);
    expect(pdbs.sort()).toEqual([...ACTOR_KINDS, "nats"].sort());
    const hpas = baseObjects.filter((o) => o.kind === "HorizontalPodAutoscaler").map((o) => o.metadata.name);
    expect(hpas.sort()).toEqual(["critic", "tools"]);
    const scaled = baseObjects.find((o) => o.kind === "ScaledObject");
    expect(scaled?.spec).toMatchObject({
      scaleTargetRef: { name: "agent" },
      triggers: [{ type: "nats-jetstream", metadata: { stream: "AGENT_RUNS", consumer: "agent-workers" } }],
    });
  });

  it("the Kubernetes NATS configuration shares nats.conf's permission model and is valid for nats-server", () => {
    const local = readFileSync(join(ROOT, "nats.conf"), "utf8");
    expect(local).toContain('include "deploy/k8s/base/nats/permissions.conf"');
    const inCluster = readFileSync(join(K8S, "base", "nats", "nats.conf"), "utf8");
    expect(inCluster).toContain('include "permissions.conf"');
    const users = [...inCluster.matchAll(/user: (\w+), password: \$NATS_(\w+)_PASSWORD/g)];
    expect(users.map((m) => m[1]).sort()).toEqual(
      [...new Set(Object.values(NATS_USERS).map((u) => u.user))].sort(),
    );
    const sts = baseObjects.find((o) => o.kind === "StatefulSet");
    expect((sts?.spec as { replicas: number }).replicas).toBe(3);
    const passwords = Object.fromEntries(users.map((m) => [`NATS_${m[2] ?? ""}_PASSWORD`, "x"]));
    const checked = spawnSync("nats-server", ["-c", join(K8S, "base", "nats", "nats.conf"), "-t"], {
      env: { ...process.env, ...passwords, POD_NAME: "nats-0" },
      encoding: "utf8",
    });
    expect(checked.status, checked.stderr).toBe(0);
    expect(checked.stderr).toMatch(/is valid/);
  });

  it("the Dockerfile builds in stages, installs production dependencies only and runs as non-root under tini", () => {
    const dockerfile = readFileSync(join(ROOT, "deploy", "Dockerfile"), "utf8");
    expect(dockerfile.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    const user = /^USER (\S+)/m.exec(dockerfile)?.[1] ?? "root";
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(dockerfile).toMatch(/^ENTRYPOINT \["\/sbin\/tini", "--", "node"\]/m);
    const cmd = /^CMD \["([^"]+)"\]/m.exec(dockerfile)?.[1] ?? "";
    expect(existsSync(join(ROOT, cmd)), cmd).toBe(true);
  });

  const render = kubectlAvailable() ? it : it.skip;
  if (!kubectlAvailable()) {
    console.warn(
      "\n*** kubectl is not on PATH: the overlays are NOT rendered (kubectl kustomize) in this run ***\n",
    );
  }
  for (const overlay of ["dev", "prod"] as const) {
    render(`overlays/${overlay} renders with kubectl kustomize into valid, consistent objects`, () => {
      const objects = kustomize(join(K8S, "overlays", overlay)) ?? [];
      const namespace = objects.find((o) => o.kind === "Namespace")?.metadata.name;
      expect(namespace).toBe(overlay === "dev" ? "agents-dev" : "agents");
      for (const object of objects) {
        validateObject(object);
        if (object.kind !== "Namespace")
          expect(object.metadata.namespace, object.metadata.name).toBe(namespace);
      }
      const configMaps = objects.filter((o) => o.kind === "ConfigMap");
      const secrets = objects.filter((o) => o.kind === "Secret").map((o) => o.metadata.name);
      const deployments = objects.filter((o) => o.kind === "Deployment");
      const image = podSpecOf(deployments[0] as K8sObject).containers[0]?.image ?? "";
      expect(image).toMatch(overlay === "dev" ? /^bounded-agents:dev$/ : /\/bounded-agents:\d+\.\d+\.\d+$/);
      for (const deployment of deployments) {
        checkActor(deployment, image);
        for (const source of podSpecOf(deployment).containers[0]?.envFrom ?? []) {
          if (source.configMapRef)
            expect(configMaps.map((c) => c.metadata.name)).toContain(source.configMapRef.name);
          if (source.secretRef) expect(source.secretRef.optional).toBe(true);
        }
      }
      const env = configMaps.find((c) => c.metadata.name.startsWith("agents-env"))?.data ?? {};
      expect(env.AGENTS_REPLICAS).toBe(overlay === "prod" ? "3" : "1");
      const scaled = objects.find((o) => o.kind === "ScaledObject")?.spec as {
        triggers: { metadata: { natsServerMonitoringEndpoint: string } }[];
      };
      expect(scaled.triggers[0]?.metadata.natsServerMonitoringEndpoint).toContain(`.${namespace}.svc`);
      const secretRefs = JSON.stringify(objects).matchAll(/"secretKeyRef":\{"name":"([^"]+)"/g);
      for (const [, name] of secretRefs) {
        const known =
          secrets.includes(name ?? "") || (overlay === "prod" && EXTERNAL_SECRETS.includes(name ?? ""));
        expect(known, `secret ${name}`).toBe(true);
      }
    });
  }

  render(
    "overlays/trading-dev adds the trading executor and planner, each a locked-down actor with the tool user",
    () => {
      const objects = kustomize(join(K8S, "overlays", "trading-dev")) ?? [];
      for (const object of objects) validateObject(object);
      const deployments = objects.filter((o) => o.kind === "Deployment");
      const names = deployments.map((d) => d.metadata.name);
      expect(names).toEqual(expect.arrayContaining([...ACTOR_KINDS, "trading-executor", "trading-planner"]));
      for (const deployment of deployments) checkActor(deployment, "bounded-agents:dev");
      const executor = deployments.find((d) => d.metadata.name === "trading-executor") as K8sObject;
      const config = objects.find(
        (o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("trading-config"),
      );
      expect(JSON.stringify(podSpecOf(executor))).toContain(config?.metadata.name ?? "missing");
      const pdbs = objects.filter((o) => o.kind === "PodDisruptionBudget").map((o) => o.metadata.name);
      expect(pdbs).toEqual(expect.arrayContaining(["trading-executor", "trading-planner"]));
    },
  );
});
