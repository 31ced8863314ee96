import type { Clock } from "./clock.js";

/** What a recurring condition amounted to when it was said again, or when it ended. */
export interface Occurrences {
  /** How many times it happened since it was last said (this one included). */
  times: number;
  /** Since it began. */
  forMs: number;
}

/**
 * A condition that repeats for as long as it lasts (a job pull the server leaves unanswered, once a
 * second while its JetStream is silent): said the first time, then at most once per `everyMs` with
 * how often it happened meanwhile, instead of one log line per occurrence from every worker.
 */
export class Recurring {
  private began: number | undefined;
  private saidAt = Number.NEGATIVE_INFINITY;
  private unsaid = 0;
  private total = 0;

  constructor(
    private readonly clock: Clock,
    private readonly everyMs: number,
  ) {}

  /** It happened again: what to say when it is time to say it, else undefined. */
  again(): Occurrences | undefined {
    const now = this.clock.now();
    this.began ??= now;
    this.unsaid++;
    this.total++;
    if (now - this.saidAt < this.everyMs) return undefined;
    this.saidAt = now;
    const times = this.unsaid;
    this.unsaid = 0;
    return { times, forMs: now - this.began };
  }

  /** It is over: how often it happened in all, and for how long; undefined when it had not begun. */
  over(): Occurrences | undefined {
    if (this.began === undefined) return undefined;
    const ended = { times: this.total, forMs: this.clock.now() - this.began };
    this.began = undefined;
    this.saidAt = Number.NEGATIVE_INFINITY;
    this.unsaid = 0;
    this.total = 0;
    return ended;
  }
}
