import { connect, headers, type NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import type { LoopTiming } from "../lib/drive.ts";
import type { FloorStream, TraceEntry } from "../lib/trace.ts";
import { STEPS } from "../lib/workload.ts";

const STREAMS = ["log", "status", "queue", "kv", "counter"] as const satisfies readonly FloorStream[];

/**
 * The floors: what the same messages cost when a bare client sends them and does nothing else.
 * `raw` replays only the run log's appends (one publish-with-ack per message, file storage);
 * `protocol` replays every message our runtime sends for a loop (appends, status, the tool services'
 * idempotency records and the other KV writes, the tool, lease and critic requests and the
 * runtime's JetStream reads, answered by a bare responder with replies of the recorded size).
 */
export class Floor {
  private readonly nc: NatsConnection;
  private readonly responder: NatsConnection;
  private readonly js: JetStreamClient;
  private next = 0;

  private constructor(nc: NatsConnection, responder: NatsConnection) {
    this.nc = nc;
    this.responder = responder;
    this.js = jetstream(nc);
  }

  static async start(natsUrl: string): Promise<Floor> {
    const nc = await connect({ servers: natsUrl });
    const responder = await connect({ servers: natsUrl });
    const jsm = await jetstreamManager(nc);
    for (const name of STREAMS) {
      await jsm.streams.add({
        name: `FLOOR_${name.toUpperCase()}`,
        subjects: [`floor.${name}.>`],
        storage: "file",
        // Rewritten keys (run status, the pool ledger) keep one value, like a KV bucket with history 1.
        ...(name === "status" ? { max_msgs_per_subject: 1 } : {}),
        // A tree's budget is a counter: an add carries a header and no body.
        ...(name === "counter" ? { allow_msg_counter: true } : {}),
      });
    }
    const sub = responder.subscribe("floor.rpc.>");
    void (async () => {
      for await (const msg of sub) {
        const size = Number(msg.headers?.get("reply-bytes") ?? "0");
        msg.respond(new Uint8Array(size));
      }
    })();
    await responder.flush();
    return new Floor(nc, responder);
  }

  /**
   * Replays one loop's trace, each message awaited in order as our runtime sends them; a step
   * ends where our runtime's does, at the log message holding a model turn's record.
   */
  async runLoop(trace: readonly TraceEntry[], only?: "log"): Promise<LoopTiming> {
    const id = `l${(this.next += 1)}`;
    const t0 = performance.now();
    let last = t0;
    const stepsMs: number[] = [];
    for (const entry of trace) {
      if (entry.kind === "append") {
        if (only && entry.stream !== only) continue;
        if (entry.stream === "counter") {
          const add = headers();
          add.set("Nats-Incr", "+1");
          await this.js.publish(`floor.counter.${id}`, new Uint8Array(0), { headers: add });
        } else await this.js.publish(`floor.${entry.stream}.${id}`, new Uint8Array(entry.bytes));
        if (entry.step) {
          const at = performance.now();
          stepsMs.push(at - last);
          last = at;
        }
      } else if (!only) {
        const h = headers();
        h.set("reply-bytes", String(entry.replyBytes));
        await this.nc.request(`floor.rpc.${entry.service}`, new Uint8Array(entry.bytes), {
          timeout: 10_000,
          headers: h,
        });
      }
    }
    return { stepsMs, loopMs: performance.now() - t0, ok: stepsMs.length === STEPS };
  }

  /** Bytes the floor streams hold, per stream. */
  async storedBytes(): Promise<Record<string, number>> {
    const jsm = await jetstreamManager(this.nc);
    const out: Record<string, number> = {};
    for (const name of STREAMS)
      out[name] = (await jsm.streams.info(`FLOOR_${name.toUpperCase()}`)).state.bytes;
    return out;
  }

  async stop(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    for (const name of STREAMS) await jsm.streams.delete(`FLOOR_${name.toUpperCase()}`);
    await this.responder.drain();
    await this.nc.drain();
  }
}
