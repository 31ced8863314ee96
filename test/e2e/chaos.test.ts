import { describe, expect, it } from "vitest";
import { serveModel } from "../../shared/bus/model-actor.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom, type Random } from "../../shared/runtime/random.js";
import {
  expectChargesInTrail,
  payingActorRun,
  payingPlanner,
  payingRun,
  serveCharge,
  settled,
} from "../helpers/cluster-suite.js";
import { useFaultSuite } from "../helpers/fault-suite.js";
import { until } from "../helpers/until.js";

const RUNS = 24;
const PAYMENTS = 6;
/** How long a payment takes: a worker is often killed while one is in flight. */
const PAYMENT_MS = 250;
/** Runs are submitted one every this long, so the faults find runs at every stage. */
const SUBMIT_EVERY_MS = 250;
/** A fault comes this long after the last one, plus up to FAULT_JITTER_MS. */
const FAULT_AFTER_MS = 300;
const FAULT_JITTER_MS = 600;
/** Workers killed at most; the schedule also ends once every run has settled. */
const MAX_KILLS = 14;
/** Reproducible: the same faults at the same moments of the schedule (the processes' timing varies). */
const SEED = 20261126;
/** How long after the last fault every run must have ended. */
const MAX_RECOVERY_MS = 15_000;

/** Three workers at first; the faults below kill, stall and replace them. */
const suite = useFaultSuite("chaos", { SUPERVISOR_POOL_CAPACITY: String(RUNS) });

/** The model actor of the odd runs, served by the test: it pays until the run has paid PAYMENTS times. */
const PLANNER = "payer";
/** How long the model actor thinks: a fault now and then finds a turn in flight. */
const TURN_MS = 100;

/**
 * Submits a run, again and again while the supervisor is down: the same runId is never admitted
 * twice. Odd runs ask the model actor for their turns (a turn in flight at a fault is asked
 * again), even runs follow a script.
 */
async function submitRun(run: number): Promise<string> {
  const runId = `chaos-${run}-${Date.now().toString(36)}`;
  const runSpec =
    run % 2 === 0
      ? payingRun("pay", PAYMENTS, `paid ${PAYMENTS} for run ${run}`)
      : payingActorRun("pay", PAYMENTS, PLANNER, `run ${run}`);
  for (;;) {
    try {
      await suite.client.submit({ ...runSpec, runId });
      return runId;
    } catch {
      await systemClock.sleep(200);
    }
  }
}

/** The faults, drawn one at a time; what they did is kept for the assertions. */
class Faults {
  readonly live = ["agent-1", "agent-2", "agent-3"];
  readonly killed: string[] = [];
  readonly log: string[] = [];
  private readonly pending: Promise<unknown>[] = [];
  private next = 4;

  constructor(private readonly random: Random) {}

  /**
   * One fault: a worker killed (and a new one started), two at once, one stalled, the supervisor
   * killed, or the nats-server killed and started again on its store.
   */
  async strike(): Promise<void> {
    const dice = this.random.next();
    if (dice < 0.08) await this.restartServer();
    else if (dice < 0.15) await this.killSupervisor();
    else if (dice < 0.35 && this.live.length > 1) this.stall();
    else this.kill(dice < 0.6 && this.live.length >= 2 ? 2 : 1);
  }

  /** How long to wait before the next fault. */
  pause(): number {
    return FAULT_AFTER_MS + this.random.next() * FAULT_JITTER_MS;
  }

  /** Waits for the replacements to be up and the stalled workers to run again. */
  async settle(): Promise<void> {
    await Promise.all(this.pending);
  }

  private kill(count: number): void {
    for (let k = 0; k < count; k += 1) {
      const victim = this.live.splice(Math.floor(this.random.next() * this.live.length), 1)[0] as string;
      // A stalled victim is woken first: a stopped process does not die of SIGKILL until it runs.
      suite.cluster.signal(victim, "SIGCONT");
      suite.cluster.signal(victim, "SIGKILL");
      this.killed.push(victim);
      const replacement = `agent-${this.next++}`;
      // Not awaited: the next fault may strike a newcomer before it is ready (it then never is).
      this.pending.push(suite.cluster.start("agent", replacement).catch(() => undefined));
      this.live.push(replacement);
    }
    this.log.push(`kill ${count}`);
  }

  private stall(): void {
    const victim = this.live[Math.floor(this.random.next() * this.live.length)] as string;
    const ms = 1_500 + this.random.next() * 1_500;
    suite.cluster.signal(victim, "SIGSTOP");
    this.pending.push(systemClock.sleep(ms).then(() => suite.cluster.signal(victim, "SIGCONT")));
    this.log.push(`stall ${Math.round(ms)} ms`);
  }

  private async restartServer(): Promise<void> {
    await suite.server.restart?.({ downMs: 1_500 });
    this.log.push("restart nats-server");
  }

  private async killSupervisor(): Promise<void> {
    suite.cluster.signal("supervisor", "SIGKILL");
    await systemClock.sleep(200);
    await suite.cluster.start("supervisor", "supervisor");
    this.log.push("kill supervisor");
  }
}

describe("chaos: workers killed with SIGKILL, two at once, stalled, the supervisor killed, the nats-server restarted, while runs pay (half of them planned by a model actor)", () => {
  it("every run commits once, every payment happens at most once and is in its run's trail, every audit trail is gapless, and no recovery waits for the ack wait", async () => {
    // A payment, served on the test's connection, which reconnects once a second like the actors':
    // after a server restart a worker may find it not serving yet.
    const { executions } = serveCharge(suite, PAYMENT_MS, "pay");
    const planner = payingPlanner("pay", PAYMENTS, (prompt) => `paid ${PAYMENTS} for ${prompt}`, TURN_MS);
    serveModel(PLANNER, planner.complete, { ...suite.bus, logger: silentLogger });
    const runIds: string[] = [];
    let submitting = true;
    const submitted = (async () => {
      for (let run = 0; run < RUNS; run += 1) {
        runIds.push(await submitRun(run));
        await systemClock.sleep(SUBMIT_EVERY_MS);
      }
      submitting = false;
    })();
    const faults = new Faults(seededRandom(SEED));
    const allSettled = async (): Promise<boolean> => {
      const statuses = await Promise.all(runIds.map((id) => suite.client.status.get(id)));
      return statuses.every((s) => s !== undefined && settled(s));
    };
    while (faults.killed.length < MAX_KILLS && (submitting || !(await allSettled()))) {
      await systemClock.sleep(faults.pause());
      await faults.strike();
    }
    await faults.settle();
    await submitted;
    const faultsOver = Date.now();

    const statuses = await Promise.all(runIds.map((id) => suite.waitFor(id, settled, 30_000)));
    // Recovery is JetStream's redelivery after a short ack wait: every run ends soon after the last
    // fault (the chaos soak's bound on a silent run), never after a long wait for a lost job.
    expect(Date.now() - faultsOver, faults.log.join(", ")).toBeLessThan(MAX_RECOVERY_MS);
    expect(faults.killed.length).toBeGreaterThanOrEqual(4);
    for (const [i, status] of statuses.entries()) {
      // The message names why a run did not commit: the diff leaves out the terminal's error.
      expect(status, `${runIds[i]}: ${status.terminal?.kind} ${status.terminal?.reason}`).toMatchObject({
        status: "committed",
        terminal: { output: `paid ${PAYMENTS} for run ${i}` },
      });
    }
    // Every payment is made: a call that finds the payment service not serving yet after a restart
    // (it reconnects later than some workers) waits for it (AGENT_SERVICE_WAIT_MS).
    expect(executions.size).toBe(RUNS * PAYMENTS);
    expect([...executions.values()].every((n) => n === 1)).toBe(true);
    let resumed = 0;
    for (const runId of runIds) {
      // Every payment made is in its run's trail, and only those: before, a call whose first attempt
      // paid (its reply lost to the restart) and whose retries found nobody serving was recorded as
      // not made.
      const events = await expectChargesInTrail(suite, runId, "pay", executions);
      resumed += events.filter((e) => e.kind === "run.resumed").length;
    }
    // The faults hit runs in flight: some were taken over.
    expect(resumed).toBeGreaterThan(0);
    // Every slot came back: a run whose run.committed never reached the stream would hold its own.
    const pool = PoolLedger.of(suite.bus);
    await until(async () => (await pool.active()).length === 0, 15_000, {
      what: "every pool slot released",
      everyMs: 200,
    });
  }, 120_000);
});
