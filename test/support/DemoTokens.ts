/**
 * The demo tokens a sandbox hub started on a pipe wrote to a file (see Bootstrap.printDemoCredentials),
 * for tests that start the real process. Node only: the browser tests import it too.
 */
import { readFileSync } from "node:fs"

/**
 * The demo's tokens as the hub's first start gave them: its standard output is a pipe here, not a
 * terminal, so they are in the owner-only file whose path it printed (Cli/Bootstrap.ts), never in the output.
 */
export const demoTokensText = (output: string): string => {
  const file = /they were written once to (\S+) \(readable by this user only\)/.exec(output)?.[1]
  return file === undefined ? "" : readFileSync(file, "utf8")
}
