import { z } from "zod";
import { ActorEnv, whole } from "../../shared/runtime/config.js";

/** A token long enough not to be guessed by trying. */
const token = z.string().min(16, "at least 16 characters");

/** The web console's environment (docs/configuration.md; the Kubernetes manifests are checked against it). */
export const ConsoleEnv = ActorEnv.extend({
  CONSOLE_HOST: z
    .string()
    .min(1)
    .default("127.0.0.1")
    .describe(
      "The address the web console listens on: loopback unless set; any other address (`0.0.0.0` in a container) needs `CONSOLE_TOKEN`, or the console refuses to start.",
    ),
  CONSOLE_PORT: whole(0, 65_535, 8090).describe("The web console's port; 0: a free port (logged as `url`)."),
  CONSOLE_TOKEN: token
    .optional()
    .describe(
      "The token every request to the web console must carry (`Authorization: Bearer <token>`, or basic auth with it as the password); unset: none asked, allowed only on loopback.",
    ),
  CONSOLE_OPERATE_TOKEN: token
    .optional()
    .describe(
      "The token that lets a request operate (approve, reject, halt, resume, the kill switch): `X-Operate-Token: <token>`, or as the bearer token; unset: the console only reads, and every operate request is refused with `FORBIDDEN`.",
    ),
  CONSOLE_CLUSTER_LISTEN_MS: whole(100, 10_000, 1_000).describe(
    "How long, in milliseconds, the cluster page listens for the supervisors, critics, tools and workers to answer their roll call (what `agentctl cluster` waits).",
  ),
});
export type ConsoleEnv = z.infer<typeof ConsoleEnv>;
