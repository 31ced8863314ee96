import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as keda from "@kubernetes-models/keda/keda.sh/v1alpha1";
import * as monitoringV1 from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import * as appsV1 from "kubernetes-models/apps/v1";
import * as autoscalingV2 from "kubernetes-models/autoscaling/v2";
import * as networkingV1 from "kubernetes-models/networking.k8s.io/v1";
import * as policyV1 from "kubernetes-models/policy/v1";
import * as coreV1 from "kubernetes-models/v1";
import { parseAllDocuments } from "yaml";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const K8S = join(ROOT, "deploy", "k8s");

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: unknown;
  data?: Record<string, string>;
  [key: string]: unknown;
}

/** Every document of a YAML file, refusing any parse error (kustomize would too, less clearly). */
export function readYaml(path: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(path, "utf8"));
  return docs.map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors.map((e) => e.message).join("; ")}`);
    return doc.toJS() as unknown;
  });
}

type Model = new (data: unknown) => { validate(): void };
const GROUPS: Record<string, Record<string, unknown>> = {
  v1: coreV1,
  "apps/v1": appsV1,
  "policy/v1": policyV1,
  "autoscaling/v2": autoscalingV2,
  "networking.k8s.io/v1": networkingV1,
  "keda.sh/v1alpha1": keda,
  "monitoring.coreos.com/v1": monitoringV1,
};

/** Validates one object against its Kubernetes (or KEDA, or Prometheus Operator) OpenAPI schema; throws what is wrong. */
export function validateObject(object: K8sObject): void {
  const model = GROUPS[object.apiVersion]?.[object.kind] as Model | undefined;
  if (!model) throw new Error(`no schema for ${object.apiVersion} ${object.kind} (${object.metadata.name})`);
  try {
    new model(object).validate();
  } catch (err) {
    throw new Error(`${object.kind}/${object.metadata.name}: ${(err as Error).message}`, { cause: err });
  }
}

/** `kubectl kustomize <dir>` when kubectl is on PATH; undefined otherwise. */
export function kustomize(dir: string): K8sObject[] | undefined {
  if (!kubectlAvailable()) return undefined;
  const out = execFileSync("kubectl", ["kustomize", dir], { encoding: "utf8" });
  return parseAllDocuments(out).map((doc) => doc.toJS() as K8sObject);
}

let kubectl: boolean | undefined;
export function kubectlAvailable(): boolean {
  if (kubectl === undefined) {
    try {
      execFileSync("kubectl", ["version", "--client"], { stdio: "ignore" });
      kubectl = true;
    } catch {
      kubectl = false;
    }
  }
  return kubectl;
}

export interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string; optional?: boolean } }[];
  ports?: { name?: string; containerPort: number }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[] };
  };
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}

export interface Probe {
  httpGet?: { path: string; port: string | number; scheme?: string };
  initialDelaySeconds?: number;
  timeoutSeconds?: number;
  periodSeconds?: number;
  failureThreshold?: number;
}

export interface PodSpec {
  containers: Container[];
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  volumes?: { name: string; configMap?: { name: string }; secret?: { secretName: string } }[];
}

export function podSpecOf(object: K8sObject): PodSpec {
  return (object.spec as { template: { spec: PodSpec } }).template.spec;
}

const POWERS: Record<string, number> = { "": 0, k: 1, m: 2, g: 3, t: 4, p: 5 };

/** Bytes of a Kubernetes quantity such as `10Gi`, `500M` or `2048` (the forms a volume size takes). */
export function quantityBytes(quantity: string): number {
  const match = /^(\d+)(?:([KMGTP])i|([kMGTP]))?$/.exec(quantity);
  if (!match) throw new Error(`not a byte quantity: ${quantity}`);
  const [, digits = "", binary, decimal] = match;
  const base = binary ? 1024 : 1000;
  return Number(digits) * base ** (POWERS[(binary ?? decimal ?? "").toLowerCase()] ?? 0);
}

/**
 * Bytes of a size in a nats-server configuration, read as nats-server 2.15 reads it (checked
 * against its /varz): `k`, `m`, `g`, `t`, `p` are powers of 1000; with `b`, `i` or `ib` after them,
 * powers of 1024 (`9GB` and `9Gi` are both 9 × 2^30), in any case.
 */
export function natsSizeBytes(size: string): number {
  const match = /^(\d+)(?:([kmgtp])(b|i|ib)?)?$/i.exec(size);
  if (!match) throw new Error(`not a nats-server size: ${size}`);
  const [, digits = "", unit = "", binary] = match;
  const base = binary ? 1024 : 1000;
  return Number(digits) * base ** (POWERS[unit.toLowerCase()] ?? 0);
}

/** cert-manager's API group, whose objects no schema package here describes. */
export const CERT_MANAGER = "cert-manager.io/v1";

/** A cert-manager Certificate's fields the components use. */
export interface CertificateSpec {
  secretName: string;
  isCA?: boolean;
  dnsNames?: string[];
  usages?: string[];
  issuerRef: { name: string; kind: string };
  privateKey?: { algorithm?: string; rotationPolicy?: string };
  duration?: string;
  renewBefore?: string;
}

/**
 * A cert-manager Issuer or Certificate, checked by hand (no schema package for cert-manager is
 * installed): an Issuer is self-signed or a CA from a Secret; a Certificate names a Secret and an
 * Issuer among `objects`, and renews before it expires.
 */
export function checkCertManager(object: K8sObject, objects: K8sObject[]): void {
  const label = `${object.kind}/${object.metadata.name}`;
  if (object.kind === "Issuer") {
    const spec = object.spec as { selfSigned?: object; ca?: { secretName: string } };
    if (!spec.selfSigned && !spec.ca?.secretName)
      throw new Error(`${label}: neither selfSigned nor a ca Secret`);
    return;
  }
  if (object.kind !== "Certificate") throw new Error(`${label}: not a kind these manifests use`);
  const spec = object.spec as CertificateSpec;
  if (!spec.secretName) throw new Error(`${label}: no secretName`);
  const issuer = objects.find(
    (o) => o.kind === spec.issuerRef.kind && o.metadata.name === spec.issuerRef.name,
  );
  if (!issuer)
    throw new Error(`${label}: its issuer ${spec.issuerRef.kind}/${spec.issuerRef.name} is not deployed`);
}
