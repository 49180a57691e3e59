/**
 * A hub as a real process (`bun src/main.ts serve`, PORT=0), for fleet, crash and command-line tests:
 * started with the given environment, its port read from its "Listening on" log line (reached on
 * 127.0.0.1 whatever HOST it binds), its output kept, and stopped (SIGTERM) or killed (SIGKILL) on
 * demand; killed when the scope closes.
 */
import { type Subprocess } from "bun"
import { Duration, Effect, type Scope } from "effect"
import { join } from "node:path"

const main = join(import.meta.dirname, "..", "..", "src", "main.ts")

export interface HubProcess {
  readonly baseUrl: string
  readonly pid: number
  /** Everything it printed so far. */
  readonly output: () => string
  readonly kill: (signal: "SIGKILL" | "SIGTERM") => void
  /** Resolves with the exit code once the process has ended. */
  readonly exited: Promise<number>
  /** Stops it with SIGTERM and resolves with everything it printed, to its last line. */
  readonly stop: () => Promise<string>
}

/** Starts a replica and waits (up to `startTimeout`) until it listens. */
export const startHubProcess = (
  env: Record<string, string>,
  startTimeout: Duration.Duration = Duration.seconds(30)
): Effect.Effect<HubProcess, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly child: Subprocess<"ignore", "pipe", "pipe">; readonly hub: HubProcess }, Error>(
      (resume) => {
        let output = ""
        let answered = false
        const child = Bun.spawn([process.execPath, main, "serve"], {
          // The tests' upstream payloads are of 2023-2025: a century's retention keeps them from being replays (TestHub.ts).
          env: {
            ...process.env,
            PORT: "0",
            HOST: "127.0.0.1",
            HUB_LOG_FORMAT: "pretty",
            HUB_RETENTION: "36500d",
            ...env
          },
          stdin: "ignore",
          stdout: "pipe",
          stderr: "pipe"
        })
        const hub = (baseUrl: string): HubProcess => ({
          baseUrl,
          pid: child.pid,
          output: () => output,
          kill: (signal) => child.kill(signal),
          exited: child.exited,
          stop: async () => {
            child.kill("SIGTERM")
            await Promise.all([child.exited, drained])
            return output
          }
        })
        const read = async (stream: ReadableStream<Uint8Array>) => {
          const decoder = new TextDecoder()
          const reader = stream.getReader()
          for (;;) {
            const chunk = await reader.read()
            if (chunk.done) return
            output += decoder.decode(chunk.value, { stream: true })
            // The pretty logger may colour the line: only the port itself is taken.
            const port = /Listening on http:\/\/[\d.]+:(\d+)/.exec(output)?.[1]
            if (!answered && port !== undefined) {
              answered = true
              resume(Effect.succeed({ child, hub: hub(`http://127.0.0.1:${port}`) }))
            }
          }
        }
        const drained = Promise.all([read(child.stdout), read(child.stderr)])
        void child.exited.then((code) => {
          if (!answered) {
            answered = true
            resume(Effect.fail(new Error(`the hub exited with ${code} before listening:\n${output}`)))
          }
        })
      }
    ).pipe(
      Effect.timeoutFail({ duration: startTimeout, onTimeout: () => new Error("the hub did not listen in time") })
    ),
    ({ child }) =>
      Effect.promise(async () => {
        child.kill("SIGKILL")
        await child.exited
      })
  ).pipe(Effect.map(({ hub }) => hub))

/** A process's resident memory in bytes, from /proc (Linux). */
export const residentBytes = async (pid: number): Promise<number> => {
  const status = await Bun.file(`/proc/${pid}/status`).text()
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  if (kb === undefined) throw new Error(`no VmRSS for process ${pid}`)
  return Number(kb) * 1024
}
