import { startLocalNats } from "../../services/local/nats-server.js";

export interface TestNats {
  url: string;
  /** Where the server came from: an external NATS_URL, or a binary this suite started. */
  source: "env" | "binary";
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A real nats-server for one suite: NATS_URL when set (the caller isolates itself with its own
 * prefix), else the `nats-server` binary on 127.0.0.1 with `-p -1` and its own store directory,
 * its port read from its log. `own` always starts a binary (for tests that stop the server).
 */
export async function startNats(options: { own?: boolean; configFile?: string } = {}): Promise<TestNats> {
  const external = options.own || options.configFile ? undefined : process.env.NATS_URL;
  if (external) {
    const stop = (): Promise<void> => Promise.resolve();
    return { url: external, source: "env", stop, [Symbol.asyncDispose]: stop };
  }
  const local = await startLocalNats(options.configFile ? { configFile: options.configFile } : {});
  return {
    url: local.url,
    source: "binary",
    stop: () => local.stop(),
    [Symbol.asyncDispose]: () => local.stop(),
  };
}
