import { z } from "zod";
import { defineTool, type AnyTool } from "../../shared/tools/tool.js";

/** What the booking tools saw: bookings started, bookings finished, and what `unbook` was given. */
export interface Bookings {
  booked: string[];
  made: string[];
  unbooked: unknown[];
}

/**
 * A booking, a side effect with a compensation: `unbook` gets what `book` was given and answered.
 * `bookMs`: how long a booking takes once started (it is counted in `booked` when it starts, in
 * `made` when it is done).
 */
export function bookingTools(bookMs = 0): Bookings & { tools: [AnyTool, AnyTool] } {
  const seen: Bookings = { booked: [], made: [], unbooked: [] };
  const book = defineTool({
    name: "book",
    description: "Books an item.",
    input: z.object({ item: z.string() }),
    capability: { kind: "compute" },
    reversibility: "compensable",
    idempotent: true,
    compensation: { tool: "unbook" },
    execute: async (input) => {
      seen.booked.push(input.item);
      await new Promise((r) => setTimeout(r, bookMs));
      seen.made.push(input.item);
      return { output: { booking: `b-${input.item}` } };
    },
  });
  const unbook = defineTool({
    name: "unbook",
    description: "Cancels a booking.",
    input: z.object({ original: z.unknown(), output: z.unknown() }),
    capability: { kind: "compute" },
    reversibility: "compensable",
    idempotent: true,
    execute: (input) => {
      seen.unbooked.push(input);
      return Promise.resolve({ output: { cancelled: true } });
    },
  });
  return { ...seen, tools: [book, unbook] };
}

/** A charge: a side effect nothing undoes (irreversible), which a failing run leaves to a human. */
export const irreversibleCharge = defineTool({
  name: "charge",
  description: "Charges an amount.",
  input: z.object({ cents: z.number() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  idempotent: false,
  execute: () => Promise.resolve({ output: { charged: true } }),
});
