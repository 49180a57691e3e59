/** `hub serve` as a real process of its own (for what only a process shows: its memory, its exit). */
import { join } from "node:path"

const main = join(import.meta.dirname, "..", "..", "src", "main.ts")

export interface HubProcess {
  readonly base: string
  readonly pid: number
  /** Stops the hub; answers everything it printed. */
  readonly stop: () => Promise<string>
}

/**
 * Starts `hub serve` on a free port it picks itself; answers once it logs the address it listens
 * on (probing for a free port first would race other test files' servers).
 */
export const startHubProcess = async (env: Record<string, string>): Promise<HubProcess> => {
  const server = Bun.spawn([process.execPath, main, "serve"], {
    env: { ...process.env, PORT: "0", HUB_LOG_LEVEL: "info", HUB_LOG_FORMAT: "json", ...env },
    stdout: "pipe"
  })
  const reader = server.stdout.getReader()
  const decoder = new TextDecoder()
  let output = ""
  let port: string | undefined
  while (port === undefined) {
    const { value, done } = await reader.read()
    if (done) throw new Error(`the hub stopped before listening: ${output}`)
    output += decoder.decode(value, { stream: true })
    port = /Listening on http:\/\/[^\s"]+:(\d+)/.exec(output)?.[1]
  }
  return {
    base: `http://127.0.0.1:${port}`,
    pid: server.pid,
    stop: async () => {
      server.kill()
      await server.exited
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) output += decoder.decode(chunk.value, { stream: true })
      return output
    }
  }
}

/** A process's resident memory in bytes, from /proc (Linux). */
export const residentBytes = async (pid: number): Promise<number> => {
  const status = await Bun.file(`/proc/${pid}/status`).text()
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  if (kb === undefined) throw new Error(`no VmRSS for process ${pid}`)
  return Number(kb) * 1024
}
