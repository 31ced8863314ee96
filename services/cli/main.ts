/**
 * agentctl: the operator's command line (`npm run agentctl -- <command>`). Every command speaks
 * the public wire contract, so anything it does can be scripted against NATS directly.
 */
import { endQuietlyWhenStdoutCloses, reportCliError } from "../../shared/runtime/cli-errors.js";
import { program } from "./program.js";

endQuietlyWhenStdoutCloses();
try {
  await program().parseAsync(process.argv);
} catch (err) {
  reportCliError(err);
}
