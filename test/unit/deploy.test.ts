import { existsSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { ActorEnv } from "../../shared/runtime/config.js";
import { parseServersFile } from "../../services/mcp/config.js";
import {
  CERT_MANAGER,
  K8S,
  ROOT,
  checkCertManager,
  kubectlAvailable,
  kustomize,
  podSpecOf,
  readYaml,
  validateObject,
  type K8sObject,
} from "../helpers/k8s.js";

import {
  EXTERNAL_SECRETS,
  IMAGE,
  BASE_KINDS,
  yamlFiles,
  base,
  baseObjects,
  actorDeployments,
  sharedEnv,
  sharedEnvValue,
  testedNatsVersion,
  CHART_STARTUP_BUDGET_S,
  checkNatsConfig,
  checkNatsStore,
  checkRenderedNats,
  checkActor,
  type Kustomization,
} from "../helpers/deploy-checks.js";

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
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
      ]),
    );
  });

  it("one Deployment per actor kind, each with probes, resources, a locked-down securityContext and its own NATS user", () => {
    expect(actorDeployments.map((d) => d.metadata.name).sort()).toEqual([...BASE_KINDS].sort());
    expect(base.images?.map((i) => i.name)).toEqual([IMAGE]);
    for (const deployment of actorDeployments) checkActor(deployment, IMAGE);
    for (const name of sharedEnv ?? []) expect(Object.keys(ActorEnv.shape), name).toContain(name);
    expect(sharedEnv).toContain("HEALTH_HOST");
  });

  it("every actor and NATS has a PodDisruptionBudget that lets a drain evict a single replica; critic and tools an HPA; agents a KEDA ScaledObject, opt-in", () => {
    const pdbs = baseObjects.filter((o) => o.kind === "PodDisruptionBudget");
    expect(pdbs.map((o) => o.metadata.name).sort()).toEqual([...BASE_KINDS, "nats"].sort());
    for (const pdb of pdbs.filter((o) => o.metadata.name !== "nats"))
      expect(pdb.spec, pdb.metadata.name).toMatchObject({ maxUnavailable: 1 });
    const hpas = baseObjects.filter((o) => o.kind === "HorizontalPodAutoscaler").map((o) => o.metadata.name);
    expect(hpas.sort()).toEqual(["critic", "tools"]);
    // KEDA is a component: the base needs no CRD beyond Kubernetes' own.
    const keda = readYaml(join(K8S, "components", "keda", "agent-scaledobject.yaml")) as K8sObject[];
    for (const object of keda) validateObject(object);
    const scaled = keda.find((o) => o.kind === "ScaledObject");
    expect(scaled?.spec).toMatchObject({
      scaleTargetRef: { name: "agent" },
      triggers: [{ type: "nats-jetstream", metadata: { stream: "AGENT_RUNS", consumer: "agent-workers" } }],
    });
  });

  it("the MCP bridge is an optional component: a locked-down actor with the tool user, its servers file a ConfigMap the bridge accepts", () => {
    const dir = join(K8S, "components", "mcp");
    const component = readYaml(join(dir, "kustomization.yaml"))[0] as Kustomization & { kind: string };
    expect(component.kind).toBe("Component");
    const objects = component.resources.flatMap((file) => readYaml(join(dir, file)) as K8sObject[]);
    for (const object of objects) validateObject(object);
    const deployment = objects.find((o) => o.kind === "Deployment") as K8sObject;
    checkActor(deployment, IMAGE);
    expect(objects.find((o) => o.kind === "PodDisruptionBudget")?.spec).toMatchObject({ maxUnavailable: 1 });
    const [file] = component.configMapGenerator?.find((g) => g.name === "mcp-servers")?.files ?? [];
    const servers = parseServersFile(readFileSync(join(dir, file ?? "missing"), "utf8"), file ?? "missing");
    expect(Object.keys(servers.servers).length).toBeGreaterThan(0);
    const pod = podSpecOf(deployment);
    const volume = pod.volumes?.find((v) => v.configMap?.name === "mcp-servers");
    const mount = (
      pod.containers[0] as unknown as { volumeMounts: { name: string; mountPath: string }[] }
    ).volumeMounts.find((m) => m.name === volume?.name);
    const setting = pod.containers[0]?.env?.find((v) => v.name === "MCP_SERVERS_FILE")?.value;
    expect(setting).toBe(`${mount?.mountPath ?? "unmounted"}/${file ?? ""}`);
  });

  it("the Kubernetes NATS configuration shares nats.conf's permission model, is valid for nats-server and fits its volume", () => {
    const local = readFileSync(join(ROOT, "nats.conf"), "utf8");
    expect(local).toContain('include "deploy/k8s/base/nats/permissions.conf"');
    const generated = base.configMapGenerator?.find((g) => g.name === "nats-config")?.files ?? [];
    const files = Object.fromEntries(
      generated.map((file) => [file.split("/").pop() ?? file, readFileSync(join(K8S, "base", file), "utf8")]),
    );
    expect(Object.keys(files).sort()).toEqual([
      "encryption.conf",
      "listeners.conf",
      "nats.conf",
      "permissions.conf",
      "route-tls.conf",
      "storage.conf",
      "users.conf",
    ]);
    expect(files["users.conf"]).toContain('include "permissions.conf"');
    for (const part of ["listeners", "users"]) expect(files["nats.conf"]).toContain(`include "${part}.conf"`);
    expect(files["nats.conf"]).toContain('include "storage.conf"');
    const sts = baseObjects.find((o) => o.kind === "StatefulSet") as K8sObject;
    expect((sts.spec as { replicas: number }).replicas).toBe(3);
    checkNatsConfig(files, "base");
    const replicas = sharedEnvValue("AGENTS_REPLICAS");
    expect(replicas).toBe("3");
    checkNatsStore(sts, files, replicas ?? "", "base");
  });

  it("NATS runs an exact image tag of the minor the tests run against, with the official Helm chart's probes", () => {
    const sts = baseObjects.find((o) => o.kind === "StatefulSet") as K8sObject;
    const [nats] = podSpecOf(sts).containers;
    const tag = /^nats:(\d+)\.(\d+)\.(\d+)-alpine$/.exec(nats?.image ?? "");
    expect(tag, `${nats?.image}: an exact tag, not a floating one`).not.toBeNull();
    const tested = testedNatsVersion();
    expect(`${tag?.[1]}.${tag?.[2]}`, `${nats?.image} against the tested nats-server ${tested}`).toBe(
      tested.split(".").slice(0, 2).join("."),
    );
    // A suite given a container (TEST_NATS_CONTAINER=1) runs the same image.
    const helper = readFileSync(join(ROOT, "test", "helpers", "nats-server.ts"), "utf8");
    expect(/CONTAINER_IMAGE = "([^"]+)"/.exec(helper)?.[1]).toBe(nats?.image);

    expect(nats?.ports).toContainEqual({ name: "monitor", containerPort: 8222 });
    expect(readFileSync(join(K8S, "base", "nats", "listeners.conf"), "utf8")).toMatch(/^http: 8222$/m);
    const startup = nats?.startupProbe;
    expect(startup?.httpGet, "startup").toEqual({ path: "/healthz", port: "monitor" });
    const budget =
      (startup?.initialDelaySeconds ?? 0) + (startup?.periodSeconds ?? 10) * (startup?.failureThreshold ?? 3);
    expect(budget, "the startup budget, in seconds").toBeGreaterThanOrEqual(CHART_STARTUP_BUDGET_S);
    expect(startup?.timeoutSeconds).toBeGreaterThanOrEqual(5);
    expect(nats?.livenessProbe?.httpGet, "liveness").toEqual({
      path: "/healthz?js-enabled-only=true",
      port: "monitor",
    });
    expect(nats?.readinessProbe?.httpGet, "readiness").toEqual({
      path: "/healthz?js-server-only=true",
      port: "monitor",
    });
    for (const probe of [nats?.livenessProbe, nats?.readinessProbe])
      expect(probe?.timeoutSeconds).toBeGreaterThanOrEqual(5);
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
        if (object.apiVersion === CERT_MANAGER) checkCertManager(object, objects);
        else validateObject(object);
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
      checkRenderedNats(objects, overlay);
      const agent = deployments.find((d) => d.metadata.name === "agent")?.spec as { replicas?: number };
      const scaled = objects.find((o) => o.kind === "ScaledObject")?.spec as
        { triggers: { metadata: { natsServerMonitoringEndpoint: string } }[] } | undefined;
      if (overlay === "prod") {
        // KEDA sets the workers' count: the Deployment names none that an apply would reset.
        expect(agent.replicas).toBeUndefined();
        expect(scaled?.triggers[0]?.metadata.natsServerMonitoringEndpoint).toContain(`.${namespace}.svc`);
      } else {
        expect(scaled).toBeUndefined();
        expect(agent.replicas).toBe(1);
      }
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
      expect(names).toEqual(expect.arrayContaining([...BASE_KINDS, "trading-executor", "trading-planner"]));
      for (const deployment of deployments) checkActor(deployment, "bounded-agents:dev");
      const executor = deployments.find((d) => d.metadata.name === "trading-executor") as K8sObject;
      const config = objects.find(
        (o) => o.kind === "ConfigMap" && o.metadata.name.startsWith("trading-config"),
      );
      expect(JSON.stringify(podSpecOf(executor))).toContain(config?.metadata.name ?? "missing");
      const pdbs = objects.filter((o) => o.kind === "PodDisruptionBudget").map((o) => o.metadata.name);
      expect(pdbs).toEqual(expect.arrayContaining(["trading-executor", "trading-planner"]));
      checkRenderedNats(objects, "trading-dev");
    },
  );
});
