import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A certificate and its key, as PEM files. */
export interface CertFiles {
  cert: string;
  key: string;
}

/** A certificate authority made here, which can sign leaf certificates. */
export interface TestCa extends CertFiles {
  name: string;
  /** A leaf certificate signed by this CA, named `name` in `dir`, for the subjectAltNames `san`. */
  issue(name: string, san: string): Promise<CertFiles>;
}

/** EC P-256 keys: generated in milliseconds, where RSA would take a second each on a busy machine. */
const KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

/**
 * A self-signed CA made with openssl (Debian's) in `dir`, valid two days: each test run makes its own,
 * so no key or certificate is kept in the repository.
 */
export async function makeCa(dir: string, name: string): Promise<TestCa> {
  const files = { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
  await run("openssl", [
    "req",
    "-x509",
    ...KEY,
    ...["-keyout", files.key, "-out", files.cert, "-days", "2", "-subj", `/CN=${name}`],
  ]);
  return {
    name,
    ...files,
    issue: async (leaf, san) => {
      const out = { cert: join(dir, `${leaf}.pem`), key: join(dir, `${leaf}.key`) };
      const csr = join(dir, `${leaf}.csr`);
      const ext = join(dir, `${leaf}.ext`);
      await run("openssl", ["req", ...KEY, "-keyout", out.key, "-out", csr, "-subj", `/CN=${leaf}`]);
      await writeFile(ext, `subjectAltName=${san}\n`);
      await run("openssl", [
        ...["x509", "-req", "-in", csr, "-CA", files.cert, "-CAkey", files.key, "-CAcreateserial"],
        ...["-out", out.cert, "-days", "2", "-extfile", ext],
      ]);
      return out;
    },
  };
}

/** The server's side of TLS in a nats-server configuration, verifying clients against `clientCa` when given. */
export function natsTlsBlock(server: CertFiles, clientCa?: string): string {
  const verify = clientCa ? `\n  ca_file: ${JSON.stringify(clientCa)}\n  verify: true` : "";
  return `tls {\n  cert_file: ${JSON.stringify(server.cert)}\n  key_file: ${JSON.stringify(server.key)}${verify}\n  timeout: 2\n}\n`;
}
