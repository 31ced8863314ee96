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
      "The token every request to the web console must carry (`Authorization: Bearer <token>`, or basic auth with it as the password); unset: none asked, allowed only on loopback, and only requests for `localhost`, `127.0.0.1` or `[::1]` (or `CONSOLE_ALLOWED_HOSTS`) are answered.",
    ),
  CONSOLE_OPERATE_TOKEN: token
    .optional()
    .describe(
      "The token that lets a request operate (approve, reject, halt, resume, the kill switch), sent only as `X-Operate-Token: <token>` (never as a bearer token or basic auth password, which a browser sends cross-site); unset: the console only reads, and every operate request is refused with `FORBIDDEN`.",
    ),
  CONSOLE_ALLOWED_HOSTS: z
    .string()
    .optional()
    .transform((text) =>
      (text ?? "")
        .split(",")
        .map((h) => h.trim())
        .filter(Boolean),
    )
    .describe(
      "Without `CONSOLE_TOKEN`: the host names, comma-separated, besides `localhost`, `127.0.0.1` and `[::1]`, that a request's `Host` may name (say the name of an SSH tunnel's end); any other is refused with `HOST_NOT_ALLOWED` (421), which keeps a DNS-rebinding page from reading the console.",
    ),
  CONSOLE_MAX_FEEDS: whole(1, 10_000, 64).describe(
    "How many live feeds (server-sent event connections, one or two per open console tab) the web console holds at once; one more is refused with `TOO_MANY_FEEDS` (503) until one closes.",
  ),
  CONSOLE_CLUSTER_LISTEN_MS: whole(100, 10_000, 1_000).describe(
    "How long, in milliseconds, the cluster page listens for the supervisors, critics, tools and workers to answer their roll call (what `agentctl cluster` waits).",
  ),
});
export type ConsoleEnv = z.infer<typeof ConsoleEnv>;
