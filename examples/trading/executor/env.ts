import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { decodeText } from "../../../shared/bus/codec.js";
import { ActorEnv } from "../../../shared/runtime/config.js";
import { AgentError } from "../../../shared/runtime/errors.js";
import { TradingConfig } from "./config.js";

/** The trading executor's environment: the actors' common settings (docs/configuration.md) and its own (README.md). */
export const TradingExecutorEnv = ActorEnv.extend({
  /** The configuration as inline JSON; defaults apply to whatever it leaves out. */
  TRADING_CONFIG: z.string().optional(),
  /** Or a YAML/JSON file with it (TRADING_CONFIG wins when both are set). */
  TRADING_CONFIG_FILE: z.string().optional(),
  /** The venue credential. The paper venue never uses it; it must never reach a log or an event. */
  TRADING_API_KEY: z.string().optional(),
});
export type TradingExecutorEnv = z.infer<typeof TradingExecutorEnv>;

/** Reads and validates the trading configuration once, at start-up. */
export function loadTradingConfig(
  env: Pick<TradingExecutorEnv, "TRADING_CONFIG" | "TRADING_CONFIG_FILE">,
): TradingConfig {
  if (env.TRADING_CONFIG) return decodeText(TradingConfig, env.TRADING_CONFIG);
  let raw: unknown = {};
  try {
    if (env.TRADING_CONFIG_FILE) raw = parseYaml(readFileSync(env.TRADING_CONFIG_FILE, "utf8"));
  } catch (err) {
    throw new AgentError("INVALID_INPUT", `the trading configuration does not parse: ${String(err)}`, {
      cause: err,
    });
  }
  const parsed = TradingConfig.safeParse(raw ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new AgentError("INVALID_INPUT", `invalid trading configuration: ${problems}`);
  }
  return parsed.data;
}
