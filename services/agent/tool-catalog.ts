import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import type { Clock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import type { SharedDescriptors } from "../../shared/bus/tool-descriptors.js";

export interface ToolCatalogOptions {
  /** How long a descriptor is reused (AGENT_TOOL_DESCRIBE_TTL_MS); 0 asks every time. */
  ttlMs: number;
  /**
   * How long a tool whose service takes describes and answers none is waited for by a run not
   * yet started, before the tool is left out of it (AGENT_TOOL_OUTAGE_MS); 0: not at all.
   */
  outageMs: number;
}

/** What one describe learnt: a descriptor (undefined: nobody serves the tool), or its failure. */
type Answer = { descriptor: ToolDescriptor | undefined } | { failed: unknown };

/**
 * Tool descriptors as their services last described them, kept for `ttlMs`: every run lease needs
 * its tools' descriptors, and asking a service each time put a round trip to another process in
 * front of every takeover. A tool nobody described is not remembered (a service that comes up is
 * found by the next lease); a changed descriptor (a redeployed service) is seen within `ttlMs`.
 * Concurrent leases asking for the same tool share one request.
 *
 * A describe nobody answered in time fails the lookup, and so the lease, which is retried: the
 * service may be busy, or its reply lost to a reconnect, and a run started without the tool fails
 * for good. A service that goes on answering none for `outageMs` (hung: subscribed, never
 * replying) is waited for no longer by a run that has not started (`mayLeaveOut`): the tool is left
 * out, as when nobody serves it, and the run fails as `planInvalid` instead of its job coming back
 * every retry delay for ever, holding its pool slot.
 *
 * A run that has started cannot leave a tool out (its log replays only with the tools it was
 * started with), and waiting for the service kept it for ever past its deadline. When a describe
 * gets no answer, or finds nobody serving the tool, the run goes on with the descriptor this
 * worker last got for it: its calls to the tool then meet the outage as a call from a lease that
 * holds the run does (timeouts, retries, the wait for a service, reconciliation), and its guard
 * bounds it. A worker that never got one itself takes the one the workers share (`shared`: each
 * worker writes there a descriptor that differs from the one it last got); without either, the
 * lease fails as before.
 */
export class ToolCatalog {
  /** When each tool's service last described it (its descriptor is `last`), until nobody serves it. */
  private readonly describedAt = new Map<string, number>();
  private readonly asking = new Map<string, Promise<Answer>>();
  /** Each tool's last descriptor, kept past its ttl and its service's absence (for started runs). */
  private readonly last = new Map<string, ToolDescriptor>();
  /** When each tool's unanswered describes began (the first one's asking), until one is answered. */
  private readonly unanswered = new Map<string, number>();

  constructor(
    /** Asks the tool's service; undefined when nobody serves it. */
    private readonly describe: (name: string) => Promise<ToolDescriptor | undefined>,
    private readonly clock: Clock,
    private readonly options: ToolCatalogOptions,
    private readonly logger: Logger,
    private readonly shared?: SharedDescriptors,
  ) {}

  /**
   * The descriptors of the named tools that are served, in the order named. With `mayLeaveOut`
   * (a run not yet started), a tool whose service has answered no describe for `outageMs` is left
   * out rather than failing the lookup; without it (a started run), a tool whose describe went
   * unanswered, or that nobody serves, comes with the last descriptor its service gave.
   */
  async lookup(names: readonly string[], mayLeaveOut = false): Promise<ToolDescriptor[]> {
    const found = await Promise.all(names.map((name) => this.one(name, mayLeaveOut)));
    return found.filter((d): d is ToolDescriptor => d !== undefined);
  }

  private async one(name: string, mayLeaveOut: boolean): Promise<ToolDescriptor | undefined> {
    const at = this.describedAt.get(name);
    const last = this.last.get(name);
    if (at !== undefined && last && this.clock.now() - at < this.options.ttlMs) return last;
    const answer = await this.ask(name);
    if ("descriptor" in answer && answer.descriptor) return answer.descriptor;
    if (!mayLeaveOut) return this.forStartedRun(name, answer);
    if ("descriptor" in answer) return undefined;
    const since = this.unanswered.get(name);
    if (since === undefined) throw answer.failed;
    const silentMs = this.clock.now() - since;
    if (silentMs < this.options.outageMs) throw answer.failed;
    this.logger.error(
      { tool: name, silentMs, outageMs: this.options.outageMs },
      "tool left out of a new run: its service has answered no describe for AGENT_TOOL_OUTAGE_MS",
    );
    return undefined;
  }

  /**
   * A started run's tool no describe returned just now: the descriptor this worker last got, or
   * else the one the workers share, when the service answered nothing (a timeout) or nobody serves
   * the tool; a lost connection, which tells nothing of the service, still fails the lookup.
   */
  private async forStartedRun(name: string, answer: Answer): Promise<ToolDescriptor | undefined> {
    const timedOut =
      "failed" in answer && answer.failed instanceof AgentError && answer.failed.code === "TOOL_TIMEOUT";
    if ("failed" in answer && !timedOut) throw answer.failed;
    const own = this.last.get(name);
    const last = own ?? (await this.sharedOne(name));
    // Without a descriptor, as for a new run.
    if (!last) {
      if ("failed" in answer) throw answer.failed;
      return undefined;
    }
    this.logger.warn(
      {
        tool: name,
        service: timedOut ? "no answer" : "nobody serves it",
        from: own ? "this worker" : "shared",
      },
      "a started run goes on with the tool's last descriptor: its calls meet the service's outage",
    );
    return last;
  }

  /** The descriptor the workers share for `name`, kept as this worker's last; undefined when unreadable. */
  private async sharedOne(name: string): Promise<ToolDescriptor | undefined> {
    try {
      const descriptor = await this.shared?.get(name);
      if (descriptor) this.last.set(name, descriptor);
      return descriptor;
    } catch (err) {
      this.logger.warn({ err, tool: name }, "the workers' shared tool descriptors could not be read");
      return undefined;
    }
  }

  /** Shares a descriptor that differs from the one this worker last got (a write per new one, not per describe). */
  private remember(name: string, descriptor: ToolDescriptor): void {
    const last = this.last.get(name);
    this.last.set(name, descriptor);
    if (!this.shared || (last && JSON.stringify(last) === JSON.stringify(descriptor))) return;
    this.shared.put(name, descriptor).catch((err: unknown) => {
      this.logger.warn({ err, tool: name }, "a tool's descriptor could not be shared with the other workers");
    });
  }

  private ask(name: string): Promise<Answer> {
    const asked = this.asking.get(name);
    if (asked) return asked;
    const askedAt = this.clock.now();
    const asking = this.describe(name)
      .then(
        (descriptor): Answer => {
          this.unanswered.delete(name);
          if (descriptor) {
            this.describedAt.set(name, this.clock.now());
            this.remember(name, descriptor);
          } else this.describedAt.delete(name);
          return { descriptor };
        },
        (failed: unknown): Answer => {
          // Only a timeout tells of the service: without a connection nothing is learnt of it.
          if (failed instanceof AgentError && failed.code === "TOOL_TIMEOUT" && !this.unanswered.has(name))
            this.unanswered.set(name, askedAt);
          return { failed };
        },
      )
      .finally(() => this.asking.delete(name));
    this.asking.set(name, asking);
    return asking;
  }
}
