/**
 * A real hub for the browser tests: `bun src/main.ts serve` on 127.0.0.1 port 0 with the sandbox
 * upstream and a fresh database in a temporary folder, read from its start banner (the address
 * actually bound) and the demo tokens file it names.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { demoTokensText } from "../../support/DemoTokens.js"

const root = join(import.meta.dirname, "..", "..", "..")

export interface RunningHub {
  readonly baseUrl: string
  readonly instanceId: string
  readonly sessionToken: string
  readonly organizationToken: string
  readonly instanceToken: string
  /** An API call as a client makes it (not through the browser): the status and the parsed body. */
  readonly api: (
    method: string,
    path: string,
    token: string,
    json?: unknown
  ) => Promise<{ readonly status: number; readonly body: unknown }>
  readonly stop: () => Promise<void>
}

const banner = (output: string, label: string) => new RegExp(`${label}\\s+(\\S+)`).exec(output)?.[1]

export const startHub = async (env: Record<string, string> = {}): Promise<RunningHub> => {
  const folder = mkdtempSync(join(tmpdir(), "hub-browser-"))
  const child: ChildProcess = spawn(
    join(root, "node_modules", ".bin", "bun"),
    [join(root, "src", "main.ts"), "serve"],
    {
      cwd: folder,
      env: {
        ...process.env,
        PORT: "0",
        HOST: "127.0.0.1",
        HUB_DB: join(folder, "hub.sqlite"),
        HUB_LOG_LEVEL: "warning",
        ...env
      },
      stdio: ["ignore", "pipe", "inherit"]
    }
  )
  const output = await new Promise<string>((resolve, reject) => {
    let text = ""
    child.stdout?.setEncoding("utf8")
    child.stdout?.on("data", (chunk: string) => {
      text += chunk
      // The banner's last line names the port bound. The tokens are not printed to a pipe: they are in
      // the file the banner names, whose curl line names the port too.
      if (/API docs: http:\/\/127\.0\.0\.1:\d+\//.test(text)) resolve(`${text}\n${demoTokensText(text)}`)
    })
    child.once("exit", (code) => reject(new Error(`the hub exited (${code}) before it was ready:\n${text}`)))
  })
  const baseUrl = /curl -s (http:\/\/127\.0\.0\.1:\d+)\//.exec(output)?.[1]
  const instanceId = banner(output, "instance id")
  const sessionToken = banner(output, "session token")
  const organizationToken = banner(output, "org token")
  const instanceToken = banner(output, "instance token")
  if (
    baseUrl === undefined || instanceId === undefined || sessionToken === undefined ||
    organizationToken === undefined || instanceToken === undefined
  ) {
    child.kill()
    throw new Error(`unexpected start banner:\n${output}`)
  }
  const api = async (method: string, path: string, token: string, json?: unknown) => {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(json === undefined ? {} : { "content-type": "application/json" })
      },
      ...(json === undefined ? {} : { body: JSON.stringify(json) })
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) }
  }
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      await exited
    }
    rmSync(folder, { recursive: true, force: true })
  }
  return { baseUrl, instanceId, sessionToken, organizationToken, instanceToken, api, stop }
}
