/** The `hub` command line, run as a real process against a temporary database. */
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { checkedFetch } from "./support/OpenApiCheck.js"

const main = join(import.meta.dirname, "..", "src", "main.ts")

/** Each case starts several Bun processes; on a busy 2-core machine that takes seconds. */
const CLI_TEST_TIMEOUT = 120_000

const run = (env: Record<string, string>, ...args: Array<string>) => {
  const result = Bun.spawnSync([process.execPath, main, ...args], {
    env: { ...process.env, HUB_LOG_LEVEL: "warning", ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  return { exitCode: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() }
}

const json = (text: string): Record<string, unknown> => {
  const parsed: unknown = JSON.parse(text)
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error(`not an object: ${text}`)
  return Object.fromEntries(Object.entries(parsed))
}

const freshDb = () => ({ HUB_DB: join(mkdtempSync(join(tmpdir(), "hub-cli-")), "hub.sqlite") })

describe("hub CLI", () => {
  it("creates an organization, an instance, a session and tokens, printing JSON", () => {
    const env = freshDb()
    const org = run(env, "org", "create", "--name", "Acme")
    expect(org.exitCode).toBe(0)
    const orgId = String(json(org.stdout).id)
    expect(orgId).toMatch(/^org_/)

    const instance = run(env, "instance", "create", "--org", orgId, "--name", "Sales", "--phone-number-id", "106540352242922", "--waba-id", "102290129340398", "--access-token", "EAAG-secret")
    expect(instance.exitCode).toBe(0)
    expect(json(instance.stdout)).toMatchObject({ name: "Sales", phone_number_id: "106540352242922", waba_id: "102290129340398" })
    expect(instance.stdout).not.toContain("EAAG-secret")
    const instanceId = String(json(instance.stdout).id)

    const session = run(env, "session", "create", "--org", orgId, "--ttl", "30m")
    expect(session.exitCode).toBe(0)
    const sessionBody = json(session.stdout)
    expect(String(sessionBody.token)).toMatch(/^mhs_/)
    const ttl = Date.parse(String(sessionBody.expires_at)) - Date.now()
    expect(ttl).toBeGreaterThan(25 * 60_000)
    expect(ttl).toBeLessThanOrEqual(30 * 60_000)

    const orgToken = run(env, "token", "create", "--org", orgId, "--name", "ci")
    expect(orgToken.exitCode).toBe(0)
    expect(Object.keys(json(orgToken.stdout)).sort()).toEqual(["created_at", "id", "name", "token"])

    const instanceToken = run(env, "token", "create", "--org", orgId, "--instance", instanceId, "--name", "bot")
    expect(instanceToken.exitCode).toBe(0)
    expect(json(instanceToken.stdout)).toMatchObject({ name: "bot", instance_id: instanceId })
    expect(String(json(instanceToken.stdout).token)).toMatch(/^mhk_/)
  }, CLI_TEST_TIMEOUT)

  it("refuses bad arguments with a message and a non-zero exit", () => {
    const env = freshDb()
    const orgId = String(json(run(env, "org", "create", "--name", "Acme").stdout).id)
    const other = String(json(run(env, "org", "create", "--name", "Other").stdout).id)
    const otherInstance = run(env, "instance", "create", "--org", other, "--name", "I", "--phone-number-id", "111", "--waba-id", "222")
    const otherInstanceId = String(json(otherInstance.stdout).id)

    const cases: Array<[Array<string>, RegExp]> = [
      [["org", "create"], /--name/],
      [["org", "create", "--name", "  "], /--name must not be empty/],
      [["session", "create", "--org", "org_nope"], /organization org_nope was not found/],
      [["session", "create", "--org", orgId, "--ttl", "soon"], /--ttl must be a positive duration/],
      [["token", "create", "--org", orgId, "--instance", otherInstanceId, "--name", "x"], /was not found in organization/],
      [["instance", "create", "--org", orgId, "--name", "I", "--phone-number-id", "abc", "--waba-id", "1"], /--phone-number-id must be a numeric Graph id/],
      [["instance", "create", "--org", orgId, "--name", "I", "--phone-number-id", "111", "--waba-id", "9"], /phone number id 111 is already bound/],
      [["instance", "create", "--org", orgId, "--name", "I", "--phone-number-id", "333", "--waba-id", "222"], /business account 222 belongs to another organization/],
      [["nonsense"], /./]
    ]
    for (const [args, message] of cases) {
      const result = run(env, ...args)
      expect(result.exitCode, args.join(" ")).not.toBe(0)
      expect(result.stdout + result.stderr, args.join(" ")).toMatch(message)
    }
  }, CLI_TEST_TIMEOUT)

  it("stops at start on a bad setting, naming the variable", () => {
    const env = freshDb()
    for (
      const [bad, name] of [
        [{ PORT: "eighty" }, "PORT"],
        [{ HUB_UPSTREAM: "meta" }, "HUB_UPSTREAM"],
        [{ HUB_SECRET_KEY: "too-short" }, "HUB_SECRET_KEY"],
        [{ HUB_UPSTREAM: "graph" }, "HUB_SECRET_KEY"],
        [{ HUB_WEBHOOK_RETRY: "1s,often" }, "HUB_WEBHOOK_RETRY"],
        [{ HUB_LOG_LEVEL: "loud" }, "HUB_LOG_LEVEL"],
        [{ HUB_MEMORY_TARGET_MB: "-1" }, "HUB_MEMORY_TARGET_MB"]
      ] as const
    ) {
      const result = run({ ...env, ...bad }, "serve")
      expect(result.exitCode, name).toBe(1)
      expect(result.stderr, name).toContain(name)
    }
  }, CLI_TEST_TIMEOUT)

  it("serve in sandbox mode bootstraps a demo tenancy once, with working printed tokens; unrouted changes are listed", async () => {
    const env = freshDb()
    const serveOnce = async () => {
      // The hub picks a free port itself and logs the address it listens on. (Probing for a free port
      // first raced the other test files' servers: one took the port, answered /health, and this
      // hub never started.)
      const server = Bun.spawn([process.execPath, main, "serve"], {
        env: { ...process.env, ...env, PORT: "0", HUB_LOG_LEVEL: "info", HUB_LOG_FORMAT: "json" },
        stdout: "pipe"
      })
      const reader = server.stdout.getReader()
      const decoder = new TextDecoder()
      let output = ""
      let base: string | undefined
      while (base === undefined) {
        const { value, done } = await reader.read()
        if (done) throw new Error(`the hub stopped before listening: ${output}`)
        output += decoder.decode(value, { stream: true })
        base = /Listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1]
      }
      return { base, stop: async () => {
        server.kill()
        await server.exited
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) output += decoder.decode(chunk.value, { stream: true })
        return output
      } }
    }

    const first = await serveOnce()
    const firstOutput = await first.stop()
    expect(firstOutput).toContain("Sandbox ready")
    const orgToken = /org token\s+(mhk_\S+)/.exec(firstOutput)?.[1]
    const sessionToken = /session token\s+(mhs_\S+)/.exec(firstOutput)?.[1]
    const instanceToken = /instance token\s+(mhk_\S+)/.exec(firstOutput)?.[1]
    expect(orgToken).toBeDefined()
    expect(sessionToken).toBeDefined()
    expect(instanceToken).toBeDefined()
    // The tokens come before "Listening on", so whoever waits for that line finds the tenancy, and the
    // curl line names the port actually bound.
    expect(firstOutput.indexOf("Sandbox ready")).toBeLessThan(firstOutput.indexOf("Listening on"))
    expect(firstOutput).toContain(`curl -s ${first.base}/api/instances -H "Authorization: Bearer ${orgToken}"`)

    const second = await serveOnce()
    const instances = await checkedFetch(`${second.base}/api/instances`, { headers: { authorization: `Bearer ${orgToken}` } })
    expect(instances.status).toBe(200)
    expect(((await instances.json()) as { data: Array<unknown> }).data).toHaveLength(1)
    const tokens = await checkedFetch(`${second.base}/api/auth/api-tokens`, { headers: { authorization: `Bearer ${sessionToken}` } })
    expect(tokens.status).toBe(200)
    // A change for a number no instance is bound to is kept aside; the operator lists it with the CLI.
    const unrouted = {
      object: "whatsapp_business_account",
      entry: [{ id: "424242", changes: [{ field: "messages", value: { metadata: { phone_number_id: "777000111" }, statuses: [] } }] }]
    }
    const posted = await checkedFetch(`${second.base}/upstream/events`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(unrouted) })
    expect(posted.status).toBe(200)
    const secondOutput = await second.stop()
    expect(secondOutput).not.toContain("Sandbox ready")

    const listed = run(env, "events", "unrouted", "--limit", "5")
    expect(listed.exitCode).toBe(0)
    expect(json(listed.stdout)).toMatchObject({
      data: [{ phone_number_id: "777000111", waba_id: "424242", field: "messages", change: { field: "messages" } }]
    })
    expect(run(env, "events", "unrouted", "--limit", "0").stderr).toContain("--limit must be a whole number")

    const db = new Database(env.HUB_DB, { readonly: true })
    expect(db.query("SELECT COUNT(*) AS n FROM organizations").get()).toEqual({ n: 1 })
    expect(db.query("SELECT COUNT(*) AS n FROM instances").get()).toEqual({ n: 1 })
    db.close()
  }, CLI_TEST_TIMEOUT)
})
