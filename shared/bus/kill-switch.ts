import type { KV } from "@nats-io/kv";
import { KillSwitchState } from "../contracts/cluster.js";
import type { Logger } from "../runtime/logger.js";
import { decode, encode } from "./codec.js";

/** The kill switch lives in the pool bucket (only the supervisor writes it), under this key. */
export const KILL_SWITCH_KEY = "killswitch";

export async function readKillSwitch(kv: KV): Promise<KillSwitchState | undefined> {
  const entry = await kv.get(KILL_SWITCH_KEY);
  if (!entry || entry.operation !== "PUT") return undefined;
  return decode(KillSwitchState, entry.value);
}

export async function writeKillSwitch(kv: KV, state: KillSwitchState): Promise<void> {
  await kv.put(KILL_SWITCH_KEY, encode(KillSwitchState, state));
}

/**
 * Keeps a live view of the kill switch: workers check `active` before every step, so a switch
 * thrown anywhere halts every running run at its next step without a request per step.
 */
export class KillSwitchView {
  private state: KillSwitchState | undefined;
  private stopWatch: (() => void) | undefined;

  get active(): KillSwitchState | undefined {
    return this.state?.active ? this.state : undefined;
  }

  async start(kv: KV, logger: Logger): Promise<void> {
    this.state = await readKillSwitch(kv);
    const watcher = await kv.watch({ key: KILL_SWITCH_KEY });
    this.stopWatch = () => watcher.stop();
    void (async () => {
      for await (const entry of watcher) {
        if (entry.operation !== "PUT") continue;
        try {
          this.state = decode(KillSwitchState, entry.value);
          logger.warn({ killSwitch: this.state }, `kill switch ${this.state.active ? "ON" : "off"}`);
        } catch (err) {
          logger.error({ err }, "unreadable kill switch entry ignored");
        }
      }
    })();
  }

  stop(): void {
    this.stopWatch?.();
  }
}
