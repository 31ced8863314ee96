/**
 * The soak's tool service, its own OS process: `book` (a side effect, not idempotent, undone by
 * `unbook`) and `unbook`. Each execution appends `<tool> <idempotencyKey>` to the ledger file
 * (CHAOS_LEDGER) before it answers, so the soak counts executions per key whatever the cluster
 * recorded. Served as the tools actor serves its tools (idempotency records, graceful stop).
 */
import { appendFileSync } from "node:fs";
import { z } from "zod";
import { onShutdown, openActorBus } from "../../dist/shared/bus/actor.js";
import { serveToolsOf } from "../../dist/shared/bus/tool-service.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../dist/shared/runtime/config.js";
import { createLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { defineTool } from "../../dist/shared/tools/tool.js";

const env = parseEnv(
  ActorEnv.extend({ CHAOS_LEDGER: z.string().min(1), CHAOS_BOOK_MS: z.coerce.number() }),
  process.env,
);
const logger = createLogger({ actor: "tools", level: env.LOG_LEVEL });
const record = (tool: string, key: string): void => appendFileSync(env.CHAOS_LEDGER, `${tool} ${key}\n`);

const book = defineTool({
  name: "book",
  description: "Books an item (a side effect that must happen once).",
  input: z.object({ item: z.string() }),
  capability: { kind: "compute" },
  reversibility: "compensable",
  idempotent: false,
  compensation: { tool: "unbook" },
  execute: async (input, ctx) => {
    record("book", ctx.idempotencyKey);
    await systemClock.sleep(env.CHAOS_BOOK_MS);
    return { output: { booking: `b-${input.item}` } };
  },
});
const unbook = defineTool({
  name: "unbook",
  description: "Cancels a booking.",
  input: z.object({ original: z.unknown(), output: z.unknown() }),
  capability: { kind: "compute" },
  reversibility: "compensable",
  idempotent: false,
  execute: (_input, ctx) => {
    record("unbook", ctx.idempotencyKey);
    return Promise.resolve({ output: { cancelled: true } });
  },
});

const bus = await openActorBus(env, "chaos-tools", { clock: systemClock, random: systemRandom, logger });
const served = serveToolsOf([book, unbook], bus, { logger });
logger.info({ tools: ["book", "unbook"] }, "booking service ready");
onShutdown(logger, async () => {
  await served.stop();
  await bus.nc.drain();
});
