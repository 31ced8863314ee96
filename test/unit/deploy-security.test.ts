import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ACTOR_KINDS } from "../../services/local/cluster.js";
import {
  CERT_MANAGER,
  K8S,
  kubectlAvailable,
  kustomize,
  podSpecOf,
  type CertificateSpec,
  type K8sObject,
} from "../helpers/k8s.js";

const render = kubectlAvailable() ? it : it.skip;
if (!kubectlAvailable()) {
  console.warn("\n*** kubectl is not on PATH: the security overlays are NOT rendered in this run ***\n");
}
const rendered = (overlay: string): K8sObject[] => kustomize(join(K8S, "overlays", overlay)) ?? [];
const configMap = (objects: K8sObject[], prefix: string): Record<string, string> =>
  objects.find((o) => o.kind === "ConfigMap" && o.metadata.name.startsWith(prefix))?.data ?? {};
const named = (objects: K8sObject[], kind: string, name: string): K8sObject | undefined =>
  objects.find((o) => o.kind === kind && o.metadata.name === name);

/** Whether a certificate's DNS name covers `host`, as a TLS client checks it (one label for `*`). */
function covers(dnsNames: string[], host: string): boolean {
  return dnsNames.some((name) =>
    name.startsWith("*.") ? host.split(".").slice(1).join(".") === name.slice(2) : name === host,
  );
}

/** The env of a Deployment's or StatefulSet's first container, by name. */
function envOf(
  object: K8sObject,
): Map<string, { value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }> {
  return new Map((podSpecOf(object).containers[0]?.env ?? []).map((v) => [v.name, v]));
}

/** The Secret mounted at the directory of `path` in a workload's first container. */
function secretAt(object: K8sObject, path: string): string | undefined {
  const pod = podSpecOf(object);
  const mount = pod.containers[0]?.volumeMounts?.find((m) => path.startsWith(`${m.mountPath}/`));
  return pod.volumes?.find((v) => v.name === mount?.name)?.secret?.secretName;
}

describe("deploy/: TLS, identities and encryption at rest", () => {
  render(
    "prod: TLS on client connections, routes and the monitoring port, every name dialled on the server's certificate",
    () => {
      const objects = rendered("prod");
      const files = configMap(objects, "nats-config");
      expect(files["listeners.conf"]).toMatch(/^https: 8222$/m);
      expect(files["listeners.conf"]).not.toMatch(/^http: /m);
      for (const file of ["listeners.conf", "route-tls.conf"])
        expect(files[file], file).toMatch(/tls \{[^}]*verify: true/);
      expect(files["nats.conf"]).toMatch(/cluster \{[^}]*include "route-tls\.conf"/);

      const server = named(objects, "Certificate", "nats-server")?.spec as CertificateSpec;
      expect(server.usages).toEqual(expect.arrayContaining(["server auth", "client auth"]));
      const env = configMap(objects, "agents-env");
      const clientHost = new URL(env.NATS_URL ?? "").hostname;
      expect(env.NATS_URL).toMatch(/^tls:\/\//);
      expect(covers(server.dnsNames ?? [], clientHost), clientHost).toBe(true);
      const routes = [...(files["nats.conf"] ?? "").matchAll(/nats:\/\/([\w.-]+):6222/g)].map(
        (m) => m[1] ?? "",
      );
      expect(routes).toHaveLength(3);
      for (const host of routes) expect(covers(server.dnsNames ?? [], host), host).toBe(true);
      const scaled = named(objects, "ScaledObject", "agent")?.spec as {
        triggers: { metadata: Record<string, string> }[];
      };
      const monitoring = scaled.triggers[0]?.metadata ?? {};
      expect(monitoring.useHttps).toBe("true");
      expect(
        covers(server.dnsNames ?? [], monitoring.natsServerMonitoringEndpoint?.split(":")[0] ?? ""),
      ).toBe(true);

      const sts = named(objects, "StatefulSet", "nats") as K8sObject;
      expect(secretAt(sts, "/etc/nats-tls/tls.crt")).toBe(server.secretName);
      const nats = podSpecOf(sts).containers[0];
      for (const probe of [nats?.startupProbe, nats?.livenessProbe, nats?.readinessProbe])
        expect(probe?.httpGet?.scheme).toBe("HTTPS");

      // Each actor: the CA, its own client certificate and key, from a Certificate of its own.
      const secrets = new Set<string>();
      for (const kind of ACTOR_KINDS) {
        const deployment = named(objects, "Deployment", kind) as K8sObject;
        const files = [env.NATS_TLS_CA, env.NATS_TLS_CERT, env.NATS_TLS_KEY].map((f) =>
          secretAt(deployment, f ?? ""),
        );
        expect(files, kind).toEqual(Array.from({ length: 3 }, () => `nats-client-${kind}`));
        const certificate = objects.find(
          (o) => o.kind === "Certificate" && (o.spec as CertificateSpec).secretName === `nats-client-${kind}`,
        );
        expect((certificate?.spec as CertificateSpec | undefined)?.usages, kind).toEqual(["client auth"]);
        secrets.add(files[0] ?? "");
      }
      expect(secrets.size).toBe(ACTOR_KINDS.length);
      // Every certificate renews before it expires, with a new key; the CA comes from an Issuer.
      for (const cert of objects.filter(
        (o) => o.kind === "Certificate" && !(o.spec as CertificateSpec).isCA,
      )) {
        const spec = cert.spec as CertificateSpec;
        expect(spec.renewBefore, cert.metadata.name).toBeDefined();
        expect(spec.privateKey?.rotationPolicy, cert.metadata.name).toBe("Always");
      }
    },
  );

  render(
    "prod: no password anywhere; the servers know each actor kind by its NKey, each seed mounted in its own pods only",
    () => {
      const objects = rendered("prod");
      const users = configMap(objects, "nats-config")["users.conf"] ?? "";
      expect(users).not.toMatch(/password:/);
      expect([...users.matchAll(/nkey: \$(NATS_\w+_NKEY)/g)]).toHaveLength(5);
      expect(JSON.stringify(objects)).not.toMatch(/"secretKeyRef":\{"name":"nats-credentials"/);
      const env = envOf(named(objects, "StatefulSet", "nats") as K8sObject);
      for (const kind of ["SUPERVISOR", "AGENT", "CRITIC", "TOOL", "CLI"])
        expect(env.get(`NATS_${kind}_NKEY`)?.valueFrom?.secretKeyRef?.name, kind).toBe("nats-user-keys");
      const seeds = ACTOR_KINDS.map((kind) => {
        const deployment = named(objects, "Deployment", kind) as K8sObject;
        return secretAt(deployment, envOf(deployment).get("NATS_NKEY_SEED_FILE")?.value ?? "");
      });
      expect(seeds).toEqual(ACTOR_KINDS.map((kind) => `nats-nkey-${kind}`));
    },
  );

  render(
    "prod: JetStream encrypted at rest, its key from a Secret; dev stays plain, with passwords and no cert-manager",
    () => {
      const objects = rendered("prod");
      const files = configMap(objects, "nats-config");
      expect(files["nats.conf"]).toMatch(/jetstream \{[^}]*include "encryption\.conf"/);
      expect(files["encryption.conf"]).toMatch(/^cipher: chachapoly$/m);
      expect(files["encryption.conf"]).toMatch(/^key: \$NATS_JS_KEY$/m);
      const env = envOf(named(objects, "StatefulSet", "nats") as K8sObject);
      expect(env.get("NATS_JS_KEY")?.valueFrom?.secretKeyRef).toEqual({
        name: "nats-encryption",
        key: "key",
      });

      const dev = rendered("dev");
      const devFiles = configMap(dev, "nats-config");
      expect(devFiles["encryption.conf"]).not.toMatch(/^\s*cipher/m);
      expect(devFiles["listeners.conf"]).toMatch(/^http: 8222$/m);
      expect(dev.filter((o) => o.apiVersion === CERT_MANAGER)).toEqual([]);
      expect(devFiles["users.conf"]).toMatch(/password: \$NATS_AGENT_PASSWORD/);
    },
  );
});
