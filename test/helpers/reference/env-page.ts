/**
 * An environment schema as the rows of docs/configuration.md: each variable's default as parseEnv
 * applies it (or as its `.meta({ default })` says it, for one computed on the machine) and its
 * `.describe()`, which is the user's documentation of it.
 */
import { z } from "zod";
import { table } from "./markdown.js";

/** The variables of `schema`, in its order, less those `base` declares (the same field). */
export function envTable(schema: z.ZodObject, base?: z.ZodObject): string[] {
  const properties = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }).properties ?? {};
  const rows = Object.entries(schema.shape)
    .filter(([name, field]) => base?.shape[name] !== field)
    .map(([name, field]) => {
      const property = properties[name];
      const shown = typeof property === "object" ? defaultText(name, property.default) : "";
      return [`\`${name}\``, shown, (field as z.ZodType).description ?? ""];
    });
  return table(["variable", "default", "description"], rows);
}

/** The variables of `schema` without a description: each must say what it does. */
export const undescribed = (schema: z.ZodObject): string[] =>
  Object.entries(schema.shape)
    .filter(([, field]) => !(field as z.ZodType).description?.trim())
    .map(([name]) => name);

/** A default as set in the environment; a duration in milliseconds also in words. */
function defaultText(name: string, value: unknown): string {
  if (value === undefined) return "unset";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  if (text === "") return '`""`';
  const words = name.endsWith("_MS") && typeof value === "number" ? inWords(value) : undefined;
  return `\`${text}\`${words ? ` (${words})` : ""}`;
}

const UNITS = [
  [86_400_000, "d"],
  [3_600_000, "h"],
  [60_000, "min"],
  [1_000, "s"],
] as const;

/** `600000` as `10 min`: the largest unit it is a whole number of, none below a second. */
function inWords(ms: number): string | undefined {
  if (ms === 0) return undefined;
  const unit = UNITS.find(([size]) => ms % size === 0);
  return unit ? `${ms / unit[0]} ${unit[1]}` : undefined;
}
