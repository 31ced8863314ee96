import type { ConsumerConfig, ConsumerInfo, JetStreamManager } from "@nats-io/jetstream";

/**
 * Creates the durable consumer `config.durable_name` on `stream` when it is missing. Returns the
 * one found otherwise, whose configuration the caller may converge; undefined when it was created.
 */
export async function ensureDurable(
  jsm: JetStreamManager,
  stream: string,
  config: Partial<ConsumerConfig> & { durable_name: string },
): Promise<ConsumerInfo | undefined> {
  const existing = await jsm.consumers.info(stream, config.durable_name).catch(() => null);
  if (existing) return existing;
  await jsm.consumers.add(stream, config);
  return undefined;
}
