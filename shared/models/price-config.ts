import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { AgentError } from "../runtime/errors.js";
import { DEFAULT_PRICES } from "./default-prices.js";
import { PriceTable } from "./pricing.js";

/**
 * MODEL_PRICES and MODEL_PRICES_FILE, for the actors that price model calls or admit runs with a
 * cost budget (agent workers, critic, supervisor). Each `.describe` is the user's documentation.
 */
export const PriceEnv = z.object({
  MODEL_PRICES_FILE: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A YAML or JSON file of model prices in USD per million tokens (`{ <model>: { inputPerMTok, outputPerMTok, cachedInputPerMTok? } }`, a key `provider:model` winning over `model`), read at start: they replace the built-in defaults model by model. A file that cannot be read or parsed stops the actor. Workers and critic price every model call with them; the supervisor refuses a run with `maxCostUsd` whose model has none.",
    ),
  MODEL_PRICES: z
    .string()
    .min(1)
    .optional()
    .describe(
      "Model prices as inline JSON, the shape `MODEL_PRICES_FILE` has; they replace the file's and the defaults' model by model.",
    ),
});
export type PriceEnv = z.infer<typeof PriceEnv>;

/**
 * The price table an actor uses: the built-in defaults, then the file's prices, then the inline
 * ones. Bad configuration throws INVALID_INPUT naming the variable and the problem, so an actor
 * stops at start rather than price calls wrongly.
 */
export function loadPriceTable(
  env: PriceEnv,
  readText: (path: string) => string = (path) => readFileSync(path, "utf8"),
): PriceTable {
  const file = env.MODEL_PRICES_FILE;
  const fromFile =
    file === undefined ? {} : pricesFrom(`MODEL_PRICES_FILE (${file})`, () => parseYaml(readText(file)));
  const inline = env.MODEL_PRICES;
  const fromEnv = inline === undefined ? {} : pricesFrom("MODEL_PRICES", () => JSON.parse(inline) as unknown);
  return { ...DEFAULT_PRICES, ...fromFile, ...fromEnv };
}

function pricesFrom(where: string, read: () => unknown): PriceTable {
  let raw: unknown;
  try {
    raw = read();
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause);
    throw new AgentError("INVALID_INPUT", `invalid configuration: ${where}: ${why}`, { cause });
  }
  // An empty file is no prices, not an error.
  if (raw === null || raw === undefined) return {};
  const parsed = PriceTable.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.join(".") || "(top)"}: ${i.message}`)
      .join("; ");
    throw new AgentError(
      "INVALID_INPUT",
      `invalid configuration: ${where}: ${problems} (expected { <model>: { inputPerMTok, outputPerMTok, cachedInputPerMTok? } }, USD per million tokens)`,
    );
  }
  return parsed.data;
}
