import type { KV } from "@nats-io/kv";
import { z } from "zod";
import { decode, encode } from "../../../shared/bus/codec.js";
import type { Clock } from "../../../shared/runtime/clock.js";
import { AgentError } from "../../../shared/runtime/errors.js";
import type { Logger } from "../../../shared/runtime/logger.js";
import { type TradingConfig, configHash } from "./config.js";
import type { ToolApproval } from "../../../shared/contracts/tool.js";
import type { ExecutorFunction, ExecutorRequest } from "./control-contract.js";
import { type Outcome, handle } from "./executor.js";
import { MarketModel } from "./market.js";
import { type ExecutorState, initialState, upgradeState } from "./state.js";

/** The stored envelope: the state, and the configuration it was built under. */
const Stored = z.object({
  config_hash: z.string(),
  state: z.custom<ExecutorState>((v) => typeof v === "object" && v !== null && "ledger" in v),
});

const KEY = "trading-executor.state";
const MAX_CAS_ATTEMPTS = 8;

/**
 * The executor's durable shell: the whole state is one value in the tool-state bucket, read,
 * changed by the pure core and written back with compare-and-set, so replicas (or a restarted
 * process) never lose or fork it. Calls within one process are serialised.
 */
export class ExecutorStore {
  private readonly market: MarketModel;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly kv: KV,
    private readonly config: TradingConfig,
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {
    this.market = new MarketModel(config);
  }

  call<F extends ExecutorFunction>(
    fn: F,
    request: ExecutorRequest<F>,
    approval?: ToolApproval,
  ): Promise<Outcome> {
    const next = this.queue.then(() => this.apply(fn, request, approval));
    this.queue = next.catch(() => undefined);
    return next;
  }

  async read(): Promise<{ state: ExecutorState; revision: number }> {
    const entry = await this.kv.get(KEY);
    if (!entry || entry.operation !== "PUT") return { state: initialState(this.config), revision: 0 };
    const stored = decode(Stored, entry.value);
    if (stored.config_hash !== configHash(this.config)) {
      throw new AgentError(
        "INVALID_INPUT",
        "CONFIG_CHANGED: the executor's configuration differs from the one its state was built under; hard limits change only with a human approval",
      );
    }
    return { state: upgradeState(stored.state), revision: entry.revision };
  }

  private async apply<F extends ExecutorFunction>(
    fn: F,
    request: ExecutorRequest<F>,
    approval: ToolApproval | undefined,
  ): Promise<Outcome> {
    for (let attempt = 1; ; attempt++) {
      const { state, revision } = await this.read();
      const outcome = handle(state, fn, request, this.config, this.market, {
        ...(approval ? { approval } : {}),
        at: this.clock.now(),
      });
      if (outcome.state === state) return outcome;
      const value = encode(Stored, { config_hash: configHash(this.config), state: outcome.state });
      try {
        if (revision === 0) await this.kv.create(KEY, value);
        else await this.kv.update(KEY, value, revision);
        return outcome;
      } catch (err) {
        if (attempt >= MAX_CAS_ATTEMPTS)
          throw new AgentError("INTERNAL", "executor state kept changing under this call", { cause: err });
        this.logger.debug({ attempt, fn }, "executor state changed underneath: retrying");
      }
    }
  }
}
