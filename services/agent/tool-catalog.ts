import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import type { Clock } from "../../shared/runtime/clock.js";

/**
 * Tool descriptors as their services last described them, kept for `ttlMs`: every run lease needs
 * its tools' descriptors, and asking a service each time put a round trip to another process in
 * front of every takeover. A tool nobody described is not remembered (a service that comes up is
 * found by the next lease); a changed descriptor (a redeployed service) is seen within `ttlMs`.
 * Concurrent leases asking for the same tool share one request. `ttlMs` 0 asks every time.
 */
export class ToolCatalog {
  private readonly known = new Map<string, { descriptor: ToolDescriptor; at: number }>();
  private readonly asking = new Map<string, Promise<ToolDescriptor | undefined>>();

  constructor(
    /** Asks the tool's service; undefined when nobody serves it. */
    private readonly describe: (name: string) => Promise<ToolDescriptor | undefined>,
    private readonly clock: Clock,
    private readonly ttlMs: number,
  ) {}

  /** The descriptors of the named tools that are served, in the order named. */
  async lookup(names: readonly string[]): Promise<ToolDescriptor[]> {
    const found = await Promise.all(names.map((name) => this.one(name)));
    return found.filter((d): d is ToolDescriptor => d !== undefined);
  }

  private one(name: string): Promise<ToolDescriptor | undefined> {
    const known = this.known.get(name);
    if (known && this.clock.now() - known.at < this.ttlMs) return Promise.resolve(known.descriptor);
    const asked = this.asking.get(name);
    if (asked) return asked;
    const asking = this.describe(name)
      .then((descriptor) => {
        if (descriptor) this.known.set(name, { descriptor, at: this.clock.now() });
        else this.known.delete(name);
        return descriptor;
      })
      .finally(() => this.asking.delete(name));
    this.asking.set(name, asking);
    return asking;
  }
}
