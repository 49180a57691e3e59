/** The `hub` command line, run as a real process against a temporary database. */
import { describe, expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Effect, Either, Exit, Scope } from "effect"
import { createHmac } from "node:crypto"
import { mkdtempSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { parseSecretKey } from "../src/Config.js"
import { makeCipher, SecretSlot } from "../src/Sql/SecretCipher.js"
import { demoTokensText } from "./support/DemoTokens.js"
import { startHubProcess } from "./support/HubProcess.js"
import { checkedFetch } from "./support/OpenApiCheck.js"

const main = join(import.meta.dirname, "..", "src", "main.ts")

/** Each case starts several Bun processes; on a busy 2-core machine that takes seconds. */
const CLI_TEST_TIMEOUT = 120_000

/** Runs the CLI; `STDIN` in env is not passed on but written to the command's standard input. */
const run = async ({ STDIN, ...env }: Record<string, string>, ...args: Array<string>) => {
  // Spawned without blocking: a synchronous spawn stops the test worker's event loop for seconds.
  const child = Bun.spawn([process.execPath, main, ...args], {
    env: { ...process.env, HUB_LOG_LEVEL: "warning", ...env },
    stdin: STDIN === undefined ? "ignore" : Buffer.from(STDIN),
    stdout: "pipe",
    stderr: "pipe"
  })
  const [stdout, stderr, exitCode] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return { exitCode, stdout, stderr }
}

const json = (text: string): Record<string, unknown> => {
  const parsed: unknown = JSON.parse(text)
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error(`not an object: ${text}`)
  return Object.fromEntries(Object.entries(parsed))
}

const freshDb = () => ({ HUB_DB: join(mkdtempSync(join(tmpdir(), "hub-cli-")), "hub.sqlite") })

/** `hub serve` in its own process on a port it picks, until `stop` (which answers everything it printed). */
const startServe = async (env: Record<string, string>) => {
  const scope = Effect.runSync(Scope.make())
  const hub = await Effect.runPromise(
    Scope.extend(startHubProcess({ HUB_LOG_LEVEL: "info", HUB_LOG_FORMAT: "json", ...env }), scope)
  )
  return {
    base: hub.baseUrl,
    stop: async () => {
      const output = await hub.stop()
      await Effect.runPromise(Scope.close(scope, Exit.void))
      return output
    }
  }
}

const UNSIGNED_WARNING = "HUB_APP_SECRET is unset: POST /upstream/events accepts unsigned posts"

describe("hub CLI", () => {
  it("creates an organization, an instance, a session and tokens, printing JSON", async () => {
    const env = freshDb()
    const org = await run(env, "org", "create", "--name", "Acme")
    expect(org.exitCode).toBe(0)
    const orgId = String(json(org.stdout).id)
    expect(orgId).toMatch(/^org_/)

    const instance = await run(
      env,
      "instance",
      "create",
      "--org",
      orgId,
      "--name",
      "Sales",
      "--phone-number-id",
      "106540352242922",
      "--waba-id",
      "102290129340398",
      "--access-token",
      "EAAG-secret"
    )
    expect(instance.exitCode).toBe(0)
    expect(json(instance.stdout)).toMatchObject({
      name: "Sales",
      phone_number_id: "106540352242922",
      waba_id: "102290129340398",
      marketing_messages: "off"
    })
    expect(instance.stdout).not.toContain("EAAG-secret")
    const instanceId = String(json(instance.stdout).id)
    const marketing = await run(
      env,
      "instance",
      "create",
      "--org",
      orgId,
      "--name",
      "Promotions",
      "--phone-number-id",
      "106540352242923",
      "--waba-id",
      "102290129340398",
      "--marketing-messages",
      "auto"
    )
    expect(json(marketing.stdout)).toMatchObject({ name: "Promotions", marketing_messages: "auto" })
    const updated = await run(env, "instance", "update", instanceId, "--marketing-messages", "auto")
    expect(updated.exitCode).toBe(0)
    expect(json(updated.stdout)).toMatchObject({ id: instanceId, marketing_messages: "auto" })
    const listed = json((await run(env, "instance", "list", "--org", orgId)).stdout).data
    expect(
      Array.isArray(listed)
        ? listed.map((
          i
        ) => (typeof i === "object" && i !== null && "marketing_messages" in i ? i.marketing_messages : undefined))
        : []
    ).toEqual(["auto", "auto"])

    const session = await run(env, "session", "create", "--org", orgId, "--ttl", "30m")
    expect(session.exitCode).toBe(0)
    const sessionBody = json(session.stdout)
    expect(String(sessionBody.token)).toMatch(/^mhs_/)
    const ttl = Date.parse(String(sessionBody.expires_at)) - Date.now()
    expect(ttl).toBeGreaterThan(25 * 60_000)
    expect(ttl).toBeLessThanOrEqual(30 * 60_000)

    const orgToken = await run(env, "token", "create", "--org", orgId, "--name", "ci")
    expect(orgToken.exitCode).toBe(0)
    expect(Object.keys(json(orgToken.stdout)).sort()).toEqual(["created_at", "id", "name", "token"])

    const instanceToken = await run(env, "token", "create", "--org", orgId, "--instance", instanceId, "--name", "bot")
    expect(instanceToken.exitCode).toBe(0)
    expect(json(instanceToken.stdout)).toMatchObject({ name: "bot", instance_id: instanceId })
    expect(String(json(instanceToken.stdout).token)).toMatch(/^mhk_/)
  }, CLI_TEST_TIMEOUT)

  it("refuses bad arguments with a message and a non-zero exit", async () => {
    const env = freshDb()
    const orgId = String(json((await run(env, "org", "create", "--name", "Acme")).stdout).id)
    const other = String(json((await run(env, "org", "create", "--name", "Other")).stdout).id)
    const otherInstance = await run(
      env,
      "instance",
      "create",
      "--org",
      other,
      "--name",
      "I",
      "--phone-number-id",
      "111",
      "--waba-id",
      "222"
    )
    const otherInstanceId = String(json(otherInstance.stdout).id)

    const cases: Array<[Array<string>, RegExp]> = [
      [["org", "create"], /--name/],
      [["org", "create", "--name", "  "], /--name must not be empty/],
      [["session", "create", "--org", "org_nope"], /organization org_nope was not found/],
      [["session", "create", "--org", orgId, "--ttl", "soon"], /--ttl must be a positive duration/],
      [["session", "revoke", "--org", "org_nope"], /organization org_nope was not found/],
      [
        ["token", "create", "--org", orgId, "--instance", otherInstanceId, "--name", "x"],
        /was not found in organization/
      ],
      [
        ["instance", "create", "--org", orgId, "--name", "I", "--phone-number-id", "abc", "--waba-id", "1"],
        /--phone-number-id must be a numeric Graph id/
      ],
      [
        ["instance", "create", "--org", orgId, "--name", "I", "--phone-number-id", "111", "--waba-id", "9"],
        /phone number id 111 is already bound/
      ],
      [
        ["instance", "create", "--org", orgId, "--name", "I", "--phone-number-id", "333", "--waba-id", "222"],
        /business account 222 belongs to another organization/
      ],
      [["nonsense"], /Invalid subcommand/],
      [["token", "list"], /Expected to find option: '--org'/],
      [["token", "revoke"], /id/],
      [["token", "revoke", "tok_nope"], /api token tok_nope was not found/],
      [["instance", "list", "--org", "org_nope"], /organization org_nope was not found/],
      [
        ["instance", "update", otherInstanceId, "--marketing-messages", "maybe"],
        /auto, off|auto \| off|marketing-messages/
      ],
      [["instance", "update", "ins_nope", "--marketing-messages", "off"], /instance ins_nope was not found/],
      [["org", "list", "--log-level", "warn"], /log-level/]
    ]
    for (const [args, message] of cases) {
      const result = await run(env, ...args)
      expect(result.exitCode, args.join(" ")).toBe(1)
      expect(result.stdout, args.join(" ")).toBe("")
      // One JSON line, argument errors (@effect/cli's own) included.
      expect(result.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1)
      expect(String(json(result.stderr).error), args.join(" ")).toMatch(message)
    }
  }, CLI_TEST_TIMEOUT)

  it("stops at start on a bad setting, naming the variable", async () => {
    const env = freshDb()
    for (
      const [bad, name] of [
        [{ PORT: "eighty" }, "PORT"],
        [{ HUB_UPSTREAM: "meta" }, "HUB_UPSTREAM"],
        [{ HUB_SECRET_KEY: "too-short" }, "HUB_SECRET_KEY"],
        [{ HUB_UPSTREAM: "graph", HUB_APP_SECRET: "app-secret" }, "HUB_SECRET_KEY"],
        [{ HUB_WEBHOOK_RETRY: "1s,often" }, "HUB_WEBHOOK_RETRY"],
        [{ HUB_LOG_LEVEL: "loud" }, "HUB_LOG_LEVEL"],
        [{ HUB_MEMORY_TARGET_MB: "-1" }, "HUB_MEMORY_TARGET_MB"]
      ] as const
    ) {
      const result = await run({ ...env, ...bad }, "serve")
      expect(result.exitCode, name).toBe(1)
      expect(result.stderr.trim().split("\n"), name).toHaveLength(1)
      expect(String(json(result.stderr).error), name).toContain(name)
    }
    // Several bad variables: one line each, and nothing else (no cause or stack dump).
    const several = await run({ ...env, PORT: "eighty", HUB_LOG_LEVEL: "loud", HUB_WEBHOOK_RETRY: "1s,often" }, "serve")
    expect(several.exitCode).toBe(1)
    const lines = several.stderr.trim().split("\n").map((line) => String(json(line).error))
    expect(lines).toHaveLength(3)
    for (const name of ["PORT", "HUB_LOG_LEVEL", "HUB_WEBHOOK_RETRY"]) {
      expect(lines.filter((line) => line.includes(name)), name).toHaveLength(1)
    }
    for (const line of lines) expect(line).toMatch(/^Configuration error: /)
  }, CLI_TEST_TIMEOUT)

  it("lists organizations, instances and tokens, and revokes a token, printing JSON", async () => {
    const env = freshDb()
    const acme = json((await run(env, "org", "create", "--name", "Acme")).stdout)
    const other = json((await run(env, "org", "create", "--name", "Other")).stdout)
    const sales = json(
      (await run(
        env,
        "instance",
        "create",
        "--org",
        String(acme.id),
        "--name",
        "Sales",
        "--phone-number-id",
        "111",
        "--waba-id",
        "222"
      )).stdout
    )
    const support = json(
      (await run(
        env,
        "instance",
        "create",
        "--org",
        String(other.id),
        "--name",
        "Support",
        "--phone-number-id",
        "333",
        "--waba-id",
        "444"
      )).stdout
    )
    const orgToken = json((await run(env, "token", "create", "--org", String(acme.id), "--name", "ci")).stdout)
    const instanceToken = json(
      (await run(env, "token", "create", "--org", String(acme.id), "--instance", String(sales.id), "--name", "bot"))
        .stdout
    )

    const orgs = await run(env, "org", "list", "--log-level", "warning")
    expect(orgs.exitCode).toBe(0)
    expect(json(orgs.stdout)).toEqual({
      data: [
        { id: acme.id, name: "Acme", created_at: acme.created_at },
        { id: other.id, name: "Other", created_at: other.created_at }
      ]
    })

    const everything = json((await run(env, "instance", "list")).stdout)
    expect(everything).toEqual({
      data: [
        { ...sales, organization_id: acme.id },
        { ...support, organization_id: other.id }
      ]
    })
    expect(json((await run(env, "instance", "list", "--org", String(other.id))).stdout)).toEqual({
      data: [{ ...support, organization_id: other.id }]
    })

    const tokens = json((await run(env, "token", "list", "--org", String(acme.id))).stdout)
    expect(tokens).toEqual({
      data: [
        {
          id: instanceToken.id,
          name: "bot",
          kind: "instance",
          instance_id: sales.id,
          token_hint: expect.stringMatching(/^mhk_/),
          created_at: instanceToken.created_at,
          last_used_at: null
        },
        {
          id: orgToken.id,
          name: "ci",
          kind: "organization",
          token_hint: expect.stringMatching(/^mhk_/),
          created_at: orgToken.created_at,
          last_used_at: null
        }
      ]
    })
    // Secrets are never listed.
    expect(JSON.stringify(tokens)).not.toContain(String(orgToken.token))

    const revoked = await run(env, "token", "revoke", String(orgToken.id))
    expect(revoked.exitCode).toBe(0)
    expect(json(revoked.stdout)).toEqual({ id: orgToken.id, organization_id: acme.id, revoked: true })
    expect(json((await run(env, "token", "list", "--org", String(acme.id))).stdout)).toMatchObject({
      data: [{ id: instanceToken.id }]
    })
    const again = await run(env, "token", "revoke", String(orgToken.id))
    expect(again.exitCode).toBe(1)
    expect(json(again.stderr)).toEqual({ error: `api token ${orgToken.id} was not found (or is already revoked)` })
  }, CLI_TEST_TIMEOUT)

  it(
    "operator commands build only the database and the repositories they use: never the upstream, the ingress or the sender",
    async () => {
      // The Graph upstream warns as it is built when HUB_GRAPH_URL names a version Meta no longer serves;
      // `serve` builds it (and so warns), an operator command must not (its stdout is its JSON alone).
      const env = {
        ...freshDb(),
        HUB_UPSTREAM: "graph",
        HUB_APP_SECRET: "meta-app-secret",
        HUB_SECRET_KEY: "ab".repeat(32),
        HUB_GRAPH_URL: "https://graph.facebook.com/v18.0"
      }
      const ended = "Graph API v18.0, which Meta stopped serving"
      const hub = await startServe(env)
      expect(await hub.stop()).toContain(ended)

      const org = await run(env, "org", "create", "--name", "Acme")
      const orgId = String(json(org.stdout).id)
      const commands = [
        ["org", "list"],
        [
          "instance",
          "create",
          "--org",
          orgId,
          "--name",
          "Sales",
          "--phone-number-id",
          "111",
          "--waba-id",
          "222",
          "--access-token",
          "EAAG-secret"
        ],
        ["instance", "list"],
        ["session", "create", "--org", orgId],
        ["token", "create", "--org", orgId, "--name", "ci"],
        ["token", "list", "--org", orgId],
        ["events", "unrouted"]
      ]
      expect(org.stdout).not.toContain(ended)
      for (const args of commands) {
        const result = await run(env, ...args)
        expect(result.exitCode, args.join(" ")).toBe(0)
        expect(result.stderr, args.join(" ")).toBe("")
        expect(result.stdout, args.join(" ")).not.toContain(ended)
        expect(json(result.stdout), args.join(" ")).toBeDefined()
      }
    },
    CLI_TEST_TIMEOUT
  )

  it("--help describes every command and option, without terminal styling when piped", async () => {
    const env = freshDb()
    const top = await run(env, "--help")
    expect(top.exitCode).toBe(0)
    const leaves = [
      "serve",
      "org create",
      "org list",
      "instance create",
      "instance list",
      "session create",
      "token create",
      "token list",
      "token revoke",
      "events unrouted"
    ]
    for (const command of [...leaves, "org", "instance", "session", "token", "events"]) {
      // Each command's line in the list names it and then says what it does.
      const line = top.stdout.split("\n").find((l) =>
        l.trim().startsWith(`- ${command} `) || l.trim() === `- ${command}`
      )
      expect(line, command).toBeDefined()
      expect(line?.trim().replace(/^- \S+( \S+)*?\s{2,}/, ""), command).toMatch(/^[A-Z].{10,}/)
    }
    // What @effect/cli says of every option of its kind; an option of ours must say more.
    const generic =
      /^(A user-defined piece of text\.|An integer\.|A true or false value\.|One of the following: .*|This setting is optional\.|This setting is optional\. Defaults to .*)$/
    for (const command of leaves) {
      const help = await run(env, ...command.split(" "), "--help")
      expect(help.exitCode, command).toBe(0)
      expect(help.stdout, command).not.toContain(String.fromCharCode(27))
      expect(help.stdout, command).toContain("DESCRIPTION")
      const paragraphs = help.stdout.split("\n").map((l) => l.trim())
      paragraphs.forEach((paragraph, index) => {
        if (!/^(--[a-z-]+|<[a-z]+>)( |$)/.test(paragraph)) return
        const next = paragraphs.slice(index + 1).findIndex((p) => /^(--|<|\(-|[A-Z]+$)/.test(p))
        const block = paragraphs.slice(index + 1, next === -1 ? undefined : index + 1 + next).filter((p) => p !== "")
        expect(block.some((p) => !generic.test(p)), `${command}: ${paragraph}`).toBe(true)
      })
    }
    expect(top.stdout).not.toContain(String.fromCharCode(27))
  }, CLI_TEST_TIMEOUT)

  it("a port already in use: one JSON line and exit 1", async () => {
    const taken = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("taken") })
    try {
      const result = await run({ ...freshDb(), PORT: String(taken.port) }, "serve")
      expect(result.exitCode).toBe(1)
      expect(result.stderr.trim().split("\n")).toHaveLength(1)
      expect(json(result.stderr)).toEqual({
        error:
          `127.0.0.1:${taken.port} is already in use: stop whatever listens there, or set PORT (or HOST) to a free one`
      })
    } finally {
      await taken.stop(true)
    }
  }, CLI_TEST_TIMEOUT)

  it(
    "serve in sandbox mode bootstraps a demo tenancy once, with working tokens kept out of its output; unrouted changes are listed",
    async () => {
      // A data folder the hub creates itself (freshDb's folder exists already).
      const env = { HUB_DB: join(freshDb().HUB_DB, "..", "data", "hub.sqlite") }
      const serveOnce = () => startServe(env)

      const first = await serveOnce()
      const firstOutput = await first.stop()
      expect(firstOutput).toContain("Sandbox ready")
      // On the loopback address (HOST's default) unsigned upstream posts are no one else's to send.
      expect(firstOutput).not.toContain(UNSIGNED_WARNING)
      // Standard output is a pipe, not a terminal: the tokens are not in it but in a file for this user only.
      const tokensText = demoTokensText(firstOutput)
      const orgToken = /org token\s+(mhk_\S+)/.exec(tokensText)?.[1]
      const sessionToken = /session token\s+(mhs_\S+)/.exec(tokensText)?.[1]
      const instanceToken = /instance token\s+(mhk_\S+)/.exec(tokensText)?.[1]
      expect(orgToken).toMatch(/^mhk_/)
      expect(sessionToken).toMatch(/^mhs_/)
      expect(instanceToken).toMatch(/^mhk_/)
      for (const token of [orgToken, sessionToken, instanceToken]) expect(firstOutput).not.toContain(token)
      const tokensFile = join(dirname(env.HUB_DB), "demo-tokens.txt")
      expect(firstOutput).toContain(`written once to ${tokensFile} (readable by this user only)`)
      expect(statSync(tokensFile).mode & 0o777).toBe(0o600)
      // The tokens come before "Listening on", so whoever waits for that line finds the tenancy, and the
      // curl line names the port actually bound.
      expect(firstOutput.indexOf("Sandbox ready")).toBeLessThan(firstOutput.indexOf("Listening on"))
      expect(tokensText).toContain(`curl -s ${first.base}/api/instances`)

      const second = await serveOnce()
      // The data folder, the database, its WAL (open while the hub runs) and the sandbox's key are the hub user's alone.
      expect(statSync(dirname(env.HUB_DB)).mode & 0o777).toBe(0o700)
      for (
        const file of [env.HUB_DB, `${env.HUB_DB}-wal`, `${env.HUB_DB}-shm`, join(dirname(env.HUB_DB), "secret.key")]
      ) {
        expect(statSync(file).mode & 0o777, file).toBe(0o600)
      }
      const instances = await checkedFetch(`${second.base}/api/instances`, {
        headers: { authorization: `Bearer ${orgToken}` }
      })
      expect(instances.status).toBe(200)
      expect(((await instances.json()) as { data: Array<unknown> }).data).toHaveLength(1)
      const tokens = await checkedFetch(`${second.base}/api/auth/api-tokens`, {
        headers: { authorization: `Bearer ${sessionToken}` }
      })
      expect(tokens.status).toBe(200)
      // A change for a number no instance is bound to is kept aside; the operator lists it with the CLI.
      const unrouted = {
        object: "whatsapp_business_account",
        entry: [{
          id: "424242",
          changes: [{ field: "messages", value: { metadata: { phone_number_id: "777000111" }, statuses: [] } }]
        }]
      }
      const posted = await checkedFetch(`${second.base}/upstream/events`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(unrouted)
      })
      expect(posted.status).toBe(200)
      const secondOutput = await second.stop()
      expect(secondOutput).not.toContain("Sandbox ready")
      // A restart says, in one line, how to get new tokens for the demo organization; both starts name the docs.
      const organizationId = /organization id\s+(org_\S+)/.exec(tokensText)?.[1]
      const hint = secondOutput.split("\n").filter((line) => line.includes("hub session create"))
      expect(hint).toEqual([expect.stringContaining(`hub session create --org ${organizationId}`)])
      expect(firstOutput).toContain(`API docs: ${first.base}/docs`)
      expect(secondOutput).toContain(`API docs: ${second.base}/docs`)

      const listed = await run(env, "events", "unrouted", "--limit", "5")
      expect(listed.exitCode).toBe(0)
      expect(json(listed.stdout)).toMatchObject({
        data: [{ phone_number_id: "777000111", waba_id: "424242", field: "messages", change: { field: "messages" } }]
      })
      expect((await run(env, "events", "unrouted", "--limit", "0")).stderr).toContain("--limit must be a whole number")

      const db = new Database(env.HUB_DB, { readonly: true })
      expect(db.query("SELECT COUNT(*) AS n FROM organizations").get()).toEqual({ n: 1 })
      expect(db.query("SELECT COUNT(*) AS n FROM instances").get()).toEqual({ n: 1 })
      db.close()
    },
    CLI_TEST_TIMEOUT
  )

  it(
    "graph mode without HUB_APP_SECRET refuses to start with one line naming it; with it, unsigned posts are refused",
    async () => {
      const env = { ...freshDb(), HUB_UPSTREAM: "graph", HUB_SECRET_KEY: "ab".repeat(32) }
      const refused = await run(env, "serve")
      expect(refused.exitCode).toBe(1)
      expect(refused.stderr).toBe(
        `${
          JSON.stringify({
            error:
              "Configuration error: HUB_APP_SECRET is required when HUB_UPSTREAM=graph (the Meta app secret that signs upstream posts)"
          })
        }\n`
      )

      const appSecret = "meta-app-secret"
      const hub = await startServe({ ...env, HUB_APP_SECRET: appSecret })
      const body = JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "424242", changes: [] }] })
      const post = (headers: Record<string, string>) =>
        fetch(`${hub.base}/upstream/events`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body
        })
      const unsigned = await post({})
      expect(unsigned.status).toBe(401)
      expect(await unsigned.json()).toEqual({ statusCode: 401, message: "Unauthorized" })
      expect((await post({ "x-hub-signature-256": `sha256=${"0".repeat(64)}` })).status).toBe(401)
      const signed = await post({
        "x-hub-signature-256": `sha256=${createHmac("sha256", appSecret).update(body).digest("hex")}`
      })
      expect(signed.status).toBe(200)
      expect(await hub.stop()).not.toContain(UNSIGNED_WARNING)
    },
    CLI_TEST_TIMEOUT
  )

  it(
    "a secret given empty or blank is a configuration error naming it, not a secret that is set; other blank settings take their default",
    async () => {
      const graph = {
        ...freshDb(),
        HUB_UPSTREAM: "graph",
        HUB_SECRET_KEY: "ab".repeat(32),
        HUB_APP_SECRET: "meta-app-secret"
      }
      const blankProblem = (name: string) =>
        `Configuration error: Expected ${name} to be a non-empty secret: it is set but empty or blank (unset it, or give it its value)`
      // What `HUB_APP_SECRET: ${HUB_APP_SECRET}` in a compose file yields when the variable is unset: the hub must not start.
      for (
        const [name, value] of [["HUB_APP_SECRET", ""], ["HUB_APP_SECRET", "  \t"], ["HUB_VERIFY_TOKEN", ""], [
          "HUB_METRICS_TOKEN",
          " "
        ], ["HUB_SECRET_KEY", ""]] as const
      ) {
        const refused = await run({ ...graph, [name]: value }, "serve")
        expect(refused.exitCode).toBe(1)
        expect(refused.stderr).toBe(`${JSON.stringify({ error: blankProblem(name) })}\n`)
      }
      // Blank non-secret settings are as if unset: the sandbox starts on its defaults.
      const hub = await startServe({ ...freshDb(), HUB_SEND_RATE: "", HUB_RETENTION: " " })
      expect((await fetch(`${hub.base}/health`)).status).toBe(200)
      await hub.stop()
      // `warn`, the name most tools use, is the warning level; an unknown name is refused with the list.
      expect((await run({ ...freshDb(), HUB_LOG_LEVEL: "warn" }, "org", "list")).exitCode).toBe(0)
      const unknown = await run({ ...freshDb(), HUB_LOG_LEVEL: "loud" }, "org", "list")
      expect(unknown.exitCode).toBe(1)
      expect(unknown.stderr).toContain("warning, error, fatal, none, warn")
    },
    CLI_TEST_TIMEOUT
  )

  it(
    "sandbox mode without HUB_APP_SECRET warns at start when HOST is not a loopback address, and still takes unsigned posts",
    async () => {
      const hub = await startServe({ ...freshDb(), HOST: "0.0.0.0" })
      const posted = await fetch(`${hub.base}/upstream/events`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ object: "whatsapp_business_account", entry: [] })
      })
      expect(posted.status).toBe(200)
      const output = await hub.stop()
      const warning = output.split("\n").find((line) => line.includes(UNSIGNED_WARNING))
      expect(warning).toBeDefined()
      expect(JSON.parse(warning ?? "{}")).toMatchObject({ logLevel: "WARN" })
      expect(warning).toContain("HOST=0.0.0.0")
    },
    CLI_TEST_TIMEOUT
  )

  it(
    "instance create reads the access token from standard input with --access-token-stdin, stored encrypted",
    async () => {
      const env = freshDb()
      const orgId = String(json((await run(env, "org", "create", "--name", "Acme")).stdout).id)
      const args = ["instance", "create", "--org", orgId, "--name", "Sales", "--waba-id", "102290129340398"]
      const created = await run(
        { ...env, STDIN: "  EAAG-from-stdin\n" },
        ...args,
        "--phone-number-id",
        "106540352242922",
        "--access-token-stdin"
      )
      expect(created.stderr).toBe("")
      expect(created.exitCode).toBe(0)
      expect(created.stdout).not.toContain("EAAG-from-stdin")
      const instanceId = String(json(created.stdout).id)

      const db = new Database(env.HUB_DB, { readonly: true })
      const row = db.query("SELECT access_token_encrypted AS stored FROM instances WHERE id = ?").get(instanceId)
      db.close()
      const stored = row !== null && typeof row === "object" && "stored" in row ? String(row.stored) : ""
      expect(stored).toMatch(/^v2:/)
      const key = parseSecretKey(readFileSync(join(dirname(env.HUB_DB), "secret.key"), "utf8"))
      if (Either.isLeft(key)) throw new Error(key.left)
      expect(Effect.runSync(makeCipher(key.right).decrypt(stored, SecretSlot.instanceAccessToken(instanceId)))).toBe(
        "EAAG-from-stdin"
      )

      const both = await run(
        { ...env, STDIN: "EAAG-x" },
        ...args,
        "--phone-number-id",
        "106540352242923",
        "--access-token-stdin",
        "--access-token",
        "EAAG-y"
      )
      expect(both.exitCode).toBe(1)
      expect(both.stderr).toBe(
        `${JSON.stringify({ error: "give the access token with --access-token or --access-token-stdin, not both" })}\n`
      )
      const empty = await run(
        { ...env, STDIN: " \n\t" },
        ...args,
        "--phone-number-id",
        "106540352242924",
        "--access-token-stdin"
      )
      expect(empty.exitCode).toBe(1)
      expect(empty.stderr).toBe(
        `${JSON.stringify({ error: "--access-token-stdin read no access token from standard input" })}\n`
      )
      const db2 = new Database(env.HUB_DB, { readonly: true })
      expect(db2.query("SELECT COUNT(*) AS n FROM instances").get()).toEqual({ n: 1 })
      db2.close()
    },
    CLI_TEST_TIMEOUT
  )
})
