/**
 * The dashboard end to end: a real hub (`bun src/main.ts serve`, sandbox upstream), Debian's
 * Chromium driven by playwright-core, a webhook receiver on 127.0.0.1. Each test signs in on a
 * page of its own and writes a screenshot of what it shows into docs/screenshots/. Waits are on
 * what the page or the receiver shows (locators, the receiver's arrivals), never on a timer.
 */
import type { Browser, Page } from "playwright-core"
import { Webhook } from "standardwebhooks"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { launchBrowser, type OpenedPage, openPage, PHONE, screenshot } from "./support/Browser.js"
import { type RunningHub, startHub } from "./support/Hub.js"
import { type Receiver, startReceiver } from "./support/Receiver.js"

let hub: RunningHub
let browser: Browser
let receiver: Receiver
const opened: Array<OpenedPage> = []

beforeAll(async () => {
  // Statuses follow a send quickly, and a failed delivery is retried at once, so the tests see both.
  hub = await startHub({ HUB_SANDBOX_STATUS_DELAY: "150ms", HUB_WEBHOOK_RETRY: "300ms,300ms,300ms" })
  browser = await launchBrowser()
  // The first delivery is refused (503); every later one succeeds.
  receiver = await startReceiver((index) => (index === 0 ? 503 : 200))
})

afterAll(async () => {
  await browser?.close()
  await receiver?.close()
  await hub?.stop()
})

afterEach(async () => {
  // Every page kept to the hub's origin, and nothing was refused by its Content-Security-Policy or thrown.
  for (const page of opened.splice(0)) {
    await page.close()
    expect(page.foreignRequests).toEqual([])
    expect(page.errors).toEqual([])
  }
})

const open = async (options: Parameters<typeof openPage>[2] = {}) => {
  const page = await openPage(browser, hub.baseUrl, options)
  opened.push(page)
  return page.page
}

const signIn = async (page: Page, token: string) => {
  await page.goto(`${hub.baseUrl}/dashboard`)
  await page.getByLabel("Token", { exact: true }).fill(token)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Sign out" }).waitFor()
}

const go = async (page: Page, link: string, heading = link) => {
  await page.getByRole("navigation", { name: "Pages" }).getByRole("link", { name: link }).click()
  await page.getByRole("heading", { level: 1, name: heading }).waitFor()
}

const record = (
  u: unknown
): Record<
  string,
  unknown
> => (typeof u === "object" && u !== null && !Array.isArray(u) ? Object.fromEntries(Object.entries(u)) : {})

const sendText = async (body: string) => {
  const sent = await hub.api("POST", "/api/messages", hub.instanceToken, {
    to: "15551234567",
    type: "text",
    text: { body }
  })
  expect(sent.status).toBe(200)
  const messages = record(sent.body).messages
  return String(Array.isArray(messages) ? record(messages[0]).id : "")
}

/** The upstream ids of the message history's rows, top to bottom. */
const upstreamIds = (page: Page) => page.locator("td[data-label='Upstream id']").allTextContents()

const simulateInbound = async (text: string) => {
  const simulated = await hub.api("POST", "/sandbox/inbound", hub.instanceToken, {
    from: "16505551234",
    type: "text",
    text: { body: text }
  })
  expect(simulated.status).toBe(200)
  return String(record(simulated.body).id)
}

describe("the dashboard as the hub serves it", () => {
  it("the page carries a Content-Security-Policy of its own origin only, no inline script; its assets are cached for good", async () => {
    const root = await fetch(`${hub.baseUrl}/`, { redirect: "manual" })
    expect(root.status).toBe(302)
    expect(root.headers.get("location")).toBe("/dashboard")

    const page = await fetch(`${hub.baseUrl}/dashboard`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8")
    const policy = page.headers.get("content-security-policy") ?? ""
    expect(policy).toContain("default-src 'none'")
    expect(policy).toContain("script-src 'self';")
    expect(policy).not.toContain("unsafe-inline")
    expect(page.headers.get("x-content-type-options")).toBe("nosniff")
    const html = await page.text()
    // Only external scripts and stylesheets, both from the hub.
    expect([...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0])).toEqual([
      expect.stringMatching(/^<script type="module" src="\/dashboard\/assets\/app-[0-9a-f]{12}\.js">$/)
    ])
    expect(html).not.toMatch(/<script\b[^>]*>[^<]/)
    expect(html).not.toMatch(/ style=/)
    expect(html).not.toMatch(/https?:\/\//)

    for (
      const [asset, type] of [[/src="([^"]+\.js)"/, "text/javascript"], [/href="([^"]+\.css)"/, "text/css"]] as const
    ) {
      const path = asset.exec(html)?.[1] ?? ""
      const answer = await fetch(`${hub.baseUrl}${path}`)
      expect(answer.status, path).toBe(200)
      expect(answer.headers.get("content-type"), path).toContain(type)
      expect(answer.headers.get("cache-control"), path).toBe("public, max-age=31536000, immutable")
      expect((await answer.text()).length, path).toBeGreaterThan(1000)
    }

    // Client-side routes are the page; an unknown asset is not.
    const route = await fetch(`${hub.baseUrl}/dashboard/webhooks/whk_anything`)
    expect(route.status).toBe(200)
    expect(await route.text()).toBe(html)
    const missing = await fetch(`${hub.baseUrl}/dashboard/assets/app-000000000000.js`)
    expect(missing.status).toBe(404)
    expect(await missing.json()).toMatchObject({ statusCode: 404 })
  })
})

describe("the dashboard in Chromium", () => {
  it("GET / leads to the sign-in; a wrong token shows the API's message; a session token sees its pages only", async () => {
    const page = await open()
    await page.goto(`${hub.baseUrl}/`)
    expect(new URL(page.url()).pathname).toBe("/dashboard")
    await page.getByRole("heading", { level: 1, name: "Messaging Hub" }).waitFor()
    await screenshot(page, "sign-in")
    // The first Tab reaches the skip link.
    await page.keyboard.press("Tab")
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content")

    await page.getByLabel("Token", { exact: true }).fill("mhk_not-a-token")
    await page.getByRole("button", { name: "Sign in" }).click()
    await expect(page.getByRole("alert").textContent()).resolves.toContain("Unauthorized")

    await page.getByLabel("Token", { exact: true }).fill(hub.sessionToken)
    await page.getByLabel("Token", { exact: true }).press("Enter")
    await page.getByRole("heading", { level: 1, name: "API tokens" }).waitFor()
    expect(new URL(page.url()).pathname).toBe("/dashboard/tokens")
    const nav = page.getByRole("navigation", { name: "Pages" })
    expect(await nav.getByRole("link").allTextContents()).toEqual(["API tokens", "Instances"])
    expect(await page.evaluate(() => sessionStorage.getItem("hub.token"))).toBe(hub.sessionToken)
  })

  it("creates a token whose secret is shown once with a copy button, and revokes it", async () => {
    const page = await open()
    await signIn(page, hub.sessionToken)
    await page.getByLabel("Name", { exact: true }).fill("ci pipeline")
    await page.getByLabel("Instance", { exact: true }).selectOption({ label: "Demo instance (100000000000001)" })
    await page.getByRole("button", { name: "Create token" }).click()

    const secretField = page.getByLabel("Secret", { exact: true })
    await secretField.waitFor()
    const secret = await secretField.inputValue()
    expect(secret).toMatch(/^mhk_[A-Za-z0-9_-]{43}$/)
    await page.getByRole("button", { name: "Copy" }).click()
    await page.getByText("Copied to the clipboard.").waitFor()
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret)
    await screenshot(page, "tokens-secret-once")
    // The secret is a working instance token.
    expect((await hub.api("GET", "/api/messages", secret)).status).toBe(200)

    await page.getByRole("button", { name: /I have stored it/ }).click()
    await secretField.waitFor({ state: "detached" })
    await page.reload()
    await page.getByRole("cell", { name: "ci pipeline" }).waitFor()
    expect(await page.content()).not.toContain(secret)
    await screenshot(page, "tokens")

    const row = page.getByRole("row").filter({ hasText: "ci pipeline" })
    await row.getByRole("button", { name: "Revoke" }).click()
    await row.getByRole("button", { name: "Revoke token" }).click()
    await page.getByText("Token “ci pipeline” revoked").waitFor()
    await row.waitFor({ state: "detached" })
    expect((await hub.api("GET", "/api/messages", secret)).status).toBe(401)
  })

  it("lists the instances with their ids, send rate and recent activity", async () => {
    await sendText("activity for the instances page")
    const page = await open()
    await signIn(page, hub.organizationToken)
    await go(page, "Instances")
    const row = page.getByRole("row").filter({ hasText: "Demo instance" })
    for (const text of [hub.instanceId, "100000000000001", "200000000000001", "80 messages/s"]) {
      await row.getByText(text).waitFor()
    }
    await row.getByText(/\d+ in the last 24 h · \d+ in all · last/).waitFor()
    await screenshot(page, "instances")
  })

  it("adds a webhook to a local receiver, shows a delivery arriving with every attempt, and retries it", async () => {
    const page = await open()
    await signIn(page, hub.organizationToken)
    await go(page, "Webhooks")
    await page.getByLabel("Name", { exact: true }).fill("local receiver")
    await page.getByLabel("URL", { exact: true }).fill(receiver.url)
    await page.getByLabel("Instance", { exact: true }).selectOption({ label: "Demo instance (100000000000001)" })
    await page.getByRole("button", { name: "Add webhook" }).click()
    const secret = await page.getByLabel("Secret", { exact: true }).inputValue()
    expect(secret).toMatch(/^whsec_/)
    await screenshot(page, "webhooks-secret-once")
    await page.getByRole("link", { name: "Open “local receiver”" }).click()
    await page.getByRole("heading", { level: 1, name: /local receiver/ }).waitFor()

    const wamid = await simulateInbound("Where is my order?")
    const [first, second] = await receiver.received(2)
    // Refused once, then delivered: the same delivery (webhook-id), signed with the secret the page showed.
    expect(first?.headers["webhook-id"]).toBe(second?.headers["webhook-id"])
    const headers = {
      "webhook-id": String(second?.headers["webhook-id"]),
      "webhook-timestamp": String(second?.headers["webhook-timestamp"]),
      "webhook-signature": String(second?.headers["webhook-signature"])
    }
    expect(JSON.stringify(new Webhook(secret).verify(second?.body ?? "", headers))).toContain(wamid)

    const delivery = page.locator("tbody.delivery").filter({ hasText: String(first?.headers["webhook-id"]) })
    await delivery.getByText("succeeded").waitFor()
    await delivery.getByRole("button", { name: "2 attempts" }).click()
    const attempts = delivery.getByRole("table", { name: /Attempts of/ })
    await attempts.getByText("HTTP 503").waitFor()
    await attempts.getByText("HTTP 200").waitFor()
    await screenshot(page, "webhook-deliveries")

    await delivery.getByRole("button", { name: /^Retry msg_/ }).click()
    await page.getByText("is queued again, with the same webhook-id").waitFor()
    const third = (await receiver.received(3))[2]
    expect(third?.headers["webhook-id"]).toBe(first?.headers["webhook-id"])
    await delivery.getByRole("button", { name: "3 attempts" }).waitFor()
    await delivery.getByText("succeeded").waitFor()
  })

  it("edits a webhook, deactivates and activates it, rotates its secret (shown once) and deletes it", async () => {
    const created = await hub.api("POST", "/api/webhooks", hub.instanceToken, {
      url: "http://127.0.0.1:9/unused",
      name: "to change"
    })
    expect(created.status).toBe(201)
    const page = await open()
    await signIn(page, hub.instanceToken)
    await go(page, "Webhooks")
    await page.getByRole("link", { name: "to change" }).click()
    const title = page.getByRole("heading", { level: 1 })
    await title.getByText("to change").waitFor()

    await page.getByLabel("Name", { exact: true }).fill("renamed")
    await page.getByRole("button", { name: "Save changes" }).click()
    await title.getByText("renamed").waitFor()
    // Deliveries one person at a time: saved, and the health counts those held in order.
    await page.getByLabel("Order of deliveries").selectOption("per_contact")
    await page.getByRole("button", { name: "Save changes" }).click()
    await page.getByText("held in order").waitFor()
    const ordered = await hub.api("GET", `/api/webhooks/${String(record(created.body).id)}`, hub.instanceToken)
    expect(record(ordered.body)).toMatchObject({ name: "renamed", ordering: "per_contact" })
    await page.getByRole("button", { name: "Deactivate" }).click()
    await title.getByText("inactive").waitFor()
    await page.getByRole("button", { name: "Activate" }).click()
    await title.getByText("active", { exact: true }).waitFor()

    await page.getByRole("button", { name: "Rotate secret" }).click()
    await page.getByRole("button", { name: "Make a new secret" }).click()
    const rotated = await page.getByLabel("Secret", { exact: true }).inputValue()
    expect(rotated).toMatch(/^whsec_/)
    expect(rotated).not.toBe(record(created.body).secret)
    await page.locator("#settings").scrollIntoViewIfNeeded()
    await screenshot(page, "webhook-settings")
    await page.getByRole("button", { name: /I have stored it/ }).click()

    await page.getByRole("button", { name: "Delete webhook" }).click()
    await page.getByRole("button", { name: "Delete for good" }).click()
    await page.getByRole("heading", { level: 1, name: "Webhooks" }).waitFor()
    await page.getByRole("cell", { name: "local receiver" }).or(page.getByText("No webhooks yet.")).first().waitFor()
    expect(await page.getByRole("link", { name: "renamed" }).count()).toBe(0)
    expect((await hub.api("GET", `/api/webhooks/${String(record(created.body).id)}`, hub.instanceToken)).status).toBe(
      404
    )
  })

  it("creates a webhook that takes only some kinds and sends custom headers: of simulated changes of several kinds it receives its kinds alone", async () => {
    const filtered = await startReceiver(() => 200)
    try {
      const page = await open()
      await signIn(page, hub.organizationToken)
      await go(page, "Webhooks")
      const form = page.getByRole("form", { name: "Add a webhook" })
      await form.getByLabel("Name", { exact: true }).fill("filtered")
      await form.getByLabel("URL", { exact: true }).fill(filtered.url)
      await form.getByLabel("Instance", { exact: true }).selectOption({ label: "Demo instance (100000000000001)" })
      await form.getByLabel("Only the kinds chosen").check()
      await form.getByRole("checkbox", { name: "account_update", exact: true }).check()
      await form.getByRole("checkbox", { name: "statuses", exact: true }).check()
      await form.getByText("2 chosen: statuses, account_update.").waitFor()
      await form.getByRole("button", { name: "Add a header" }).click()
      // The new row's name takes the focus.
      await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("placeholder"))).toBe("x-tenant")
      await page.keyboard.type("X-Tenant")
      await form.getByLabel("Header 1 Value").fill("acme")
      await form.getByRole("button", { name: "Add a header" }).click()
      await form.getByLabel("Header 2 Name").fill("Authorization")
      await form.getByLabel("Header 2 Value").fill("Bearer s3cret")
      await screenshot(page, "webhook-filters", true)
      await form.getByRole("button", { name: "Add webhook" }).click()
      await page.getByLabel("Secret", { exact: true }).waitFor()
      await page.getByRole("link", { name: "Open “filtered”" }).click()
      await page.getByRole("heading", { level: 1, name: /filtered/ }).waitFor()
      const id = decodeURIComponent(new URL(page.url()).pathname.split("/").pop() ?? "")

      // The record as the API answers it: the kinds, and the secret header redacted.
      const kinds = page.getByRole("region", { name: "Event filter" })
      expect(await kinds.getByRole("checkbox", { name: "account_update", exact: true }).isChecked()).toBe(true)
      expect(await kinds.getByRole("checkbox", { name: "messages", exact: true }).isChecked()).toBe(false)
      const headers = page.getByRole("region", { name: "Custom headers" })
      expect(await headers.getByLabel("Header 1 Name").inputValue()).toBe("x-tenant")
      expect(await headers.getByLabel("Header 1 Value").inputValue()).toBe("acme")
      expect(await headers.getByLabel("Header 2 Name").inputValue()).toBe("authorization")
      expect(await headers.getByLabel("Header 2 Value").inputValue()).toBe("[redacted]")
      expect(await page.content()).not.toContain("s3cret")

      // The sandbox posts changes of three kinds in one envelope, then one of a fourth kind.
      await go(page, "Sandbox")
      const changes = page.getByRole("form", { name: "Simulate upstream changes" })
      await changes.getByLabel("Instance", { exact: true }).selectOption({ label: "Demo instance (100000000000001)" })
      await changes.getByLabel("Change 1 field").selectOption("phone_number_quality_update")
      await changes.getByLabel("Change 1 value (JSON)").fill("{\"event\": \"FLAGGED\", \"current_limit\": \"TIER_1K\"}")
      await changes.getByRole("button", { name: "Add a change" }).click()
      await changes.getByLabel("Change 2 field").selectOption("account_update")
      await changes.getByLabel("Change 2 value (JSON)").fill("{\"event\": \"VERIFIED_ACCOUNT\"}")
      await changes.getByRole("button", { name: "Add a change" }).click()
      await changes.getByLabel("Change 3 field").selectOption("message_template_status_update")
      await changes.getByLabel("Change 3 value (JSON)").fill("{\"event\": \"APPROVED\", \"message_template_id\": 1}")
      await changes.getByRole("button", { name: "Simulate changes" }).click()
      await changes.getByText(/^3 changes accepted: \d+ webhook deliveries queued\.$/).waitFor()
      await screenshot(page, "sandbox-changes")
      await changes.getByRole("button", { name: "Remove change 3" }).click()
      await changes.getByRole("button", { name: "Remove change 2" }).click()
      await changes.getByLabel("Change 1 field").selectOption("account_alerts")
      await changes.getByLabel("Change 1 value (JSON)").fill("not json")
      await changes.getByRole("button", { name: "Simulate changes" }).click()
      await changes.getByRole("alert").getByText("must be a JSON object").waitFor()
      await changes.getByLabel("Change 1 value (JSON)").fill("{\"entity_type\": \"WABA\"}")
      await changes.getByRole("button", { name: "Simulate changes" }).click()
      await changes.getByText(/^1 change accepted: \d+ webhook deliver(y|ies) queued\.$/).waitFor()

      // One delivery in all, holding the account_update change alone, unaltered, with the custom headers.
      const [arrived] = await filtered.received(1)
      const envelope = record(JSON.parse(arrived?.body ?? "{}"))
      const entry = record(Array.isArray(envelope.entry) ? envelope.entry[0] : undefined)
      const fields = Array.isArray(entry.changes) ? entry.changes.map((change) => record(change).field) : []
      expect(fields).toEqual(["account_update"])
      expect(record(record(Array.isArray(entry.changes) ? entry.changes[0] : undefined).value).event).toBe(
        "VERIFIED_ACCOUNT"
      )
      expect(arrived?.headers["x-tenant"]).toBe("acme")
      expect(arrived?.headers.authorization).toBe("Bearer s3cret")
      const log = await hub.api("GET", `/api/webhooks/${id}/deliveries`, hub.organizationToken)
      expect(record(log.body).total).toBe(1)

      // The list finds it by a kind it takes, and not by one it does not.
      await go(page, "Webhooks")
      await page.getByLabel("Receiving", { exact: true }).selectOption("account_update")
      await page.getByRole("row").filter({ hasText: "filtered" }).getByText("statuses, account_update").waitFor()
      await page.getByLabel("Receiving", { exact: true }).selectOption("account_alerts")
      await page.getByRole("link", { name: "filtered" }).waitFor({ state: "detached" })
      await page.locator("caption", { hasText: "Webhooks receiving account_alerts" }).waitFor({ state: "attached" })
      await page.getByRole("link", { name: "local receiver" }).waitFor()
    } finally {
      await filtered.close()
    }
  })

  it("edits custom headers (a secret kept, then replaced; a refused one shown as the API's message), and a test event carries them and shows its outcome", async () => {
    const listener = await startReceiver(() => 200)
    try {
      const created = await hub.api("POST", "/api/webhooks", hub.instanceToken, {
        url: listener.url,
        name: "with headers",
        events: ["account_alerts"],
        headers: { authorization: "Bearer old", "x-keep": "1" }
      })
      expect(created.status).toBe(201)
      const id = String(record(created.body).id)
      const page = await open()
      await signIn(page, hub.instanceToken)
      await page.goto(`${hub.baseUrl}/dashboard/webhooks/${id}`)
      const headers = page.getByRole("region", { name: "Custom headers" })
      expect(await headers.getByLabel("Header 1 Value").inputValue()).toBe("[redacted]")

      await headers.getByLabel("Header 2 Value").fill("2")
      await headers.getByRole("button", { name: "Save headers" }).click()
      // The secret left redacted keeps its value (the API's "[redacted]" placeholder says so).
      await headers.getByText("Saved: 2 custom headers.").waitFor()
      const kept = await hub.api("GET", `/api/webhooks/${id}`, hub.instanceToken)
      expect(record(kept.body).headers).toEqual({ authorization: "[redacted]", "x-keep": "2" })
      await headers.getByRole("button", { name: "Replace the value of authorization" }).click()
      // The value field takes the focus, empty.
      await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toMatch(/^edit-headers-value-/)
      await page.keyboard.type("Bearer new")
      await headers.getByRole("button", { name: "Add a header" }).click()
      await headers.getByLabel("Header 3 Name").fill("Host")
      await headers.getByLabel("Header 3 Value").fill("elsewhere.example")
      await headers.getByRole("button", { name: "Save headers" }).click()
      await headers.getByRole("alert").getByText(
        "header host is set by the hub or changes how the request is sent; it cannot be a custom header"
      ).waitFor()
      await headers.getByRole("button", { name: "Remove header 3 (Host)" }).click()
      await headers.getByRole("button", { name: "Save headers" }).click()
      await headers.getByText("Saved: 2 custom headers.").waitFor()
      expect(await headers.getByLabel("Header 1 Value").inputValue()).toBe("[redacted]")
      expect(await headers.getByLabel("Header 2 Value").inputValue()).toBe("2")
      await headers.scrollIntoViewIfNeeded()
      await screenshot(page, "webhook-headers")

      const test = page.getByRole("region", { name: "Test" })
      await test.getByRole("button", { name: "Send a test event" }).click()
      await test.getByText(/^Delivered: the receiver answered HTTP 200 in \d+ ms\.$/).waitFor()
      const [arrived] = await listener.received(1)
      expect(record(JSON.parse(arrived?.body ?? "{}")).object).toBe("hub.test")
      expect(arrived?.headers.authorization).toBe("Bearer new")
      expect(arrived?.headers["x-keep"]).toBe("2")
      // A second test within the second is refused: the API's message, and when to try again.
      await test.getByRole("button", { name: "Send a test event" }).click()
      await test.getByRole("alert").getByText(
        /tested less than a second ago; at most one test per webhook a second\. Try again in 1 s\./
      ).waitFor()
      await test.scrollIntoViewIfNeeded()
      await screenshot(page, "webhook-test")
      // The test delivery shows in the log.
      await page.getByRole("region", { name: "Deliveries" }).locator("tbody.delivery").filter({
        hasText: String(arrived?.headers["webhook-id"])
      }).getByText("succeeded").waitFor()
    } finally {
      await listener.close()
    }
  })

  it("counts a failing receiver's dead deliveries in its health, finds them in the delivery search by status, and recovers them once it is back", async () => {
    let up = false
    const flaky = await startReceiver(() => (up ? 200 : 503))
    try {
      const created = await hub.api("POST", "/api/webhooks", hub.organizationToken, {
        instance_id: hub.instanceId,
        url: flaky.url,
        name: "flaky",
        events: ["account_review_update"]
      })
      expect(created.status).toBe(201)
      const id = String(record(created.body).id)
      const page = await open()
      await signIn(page, hub.organizationToken)
      await page.goto(`${hub.baseUrl}/dashboard/webhooks/${id}`)
      const health = page.getByRole("region", { name: "Health" })
      await health.getByText("None recorded").waitFor()
      await health.locator("li.stat-bad").filter({ hasText: /^0 dead/ }).waitFor()

      for (const decision of ["APPROVED", "REJECTED"]) {
        const simulated = await hub.api("POST", "/sandbox/changes", hub.organizationToken, {
          instance_id: hub.instanceId,
          changes: [{ field: "account_review_update", value: { decision } }]
        })
        expect(simulated.status).toBe(200)
      }
      // Two deliveries, each tried four times (three retries), then dead.
      const refused = await flaky.received(8)
      const webhookIds = new Set(refused.map((r) => String(r.headers["webhook-id"])))
      expect(webhookIds.size).toBe(2)
      await health.locator("li.stat-bad").filter({ hasText: /^2 dead/ }).waitFor()
      await health.locator("li.stat-warn").filter({ hasText: /^6 retried/ }).waitFor()
      await health.getByText("active · failing").waitFor()
      expect(await health.getByText("Not failing").count()).toBe(0)
      await health.scrollIntoViewIfNeeded()
      await screenshot(page, "webhook-health")

      // The delivery search, by status and webhook.
      await go(page, "Deliveries")
      await page.getByLabel("Status", { exact: true }).selectOption("dead")
      await page.getByLabel("Webhook", { exact: true }).selectOption({ label: "flaky" })
      await page.getByRole("button", { name: "Apply filters" }).click()
      await page.waitForURL(/status=dead/)
      await page.getByText("Page 1 of 1 · 2 deliveries").waitFor()
      const rows = page.locator("tbody.delivery")
      expect(await rows.count()).toBe(2)
      for (const webhookId of webhookIds) {
        await rows.filter({ hasText: webhookId }).getByText("dead", { exact: true }).waitFor()
      }
      await rows.first().getByRole("button", { name: "4 attempts" }).click()
      await rows.first().getByRole("table", { name: /Attempts of/ }).getByText("HTTP 503").first().waitFor()
      await screenshot(page, "delivery-search")
      await page.getByLabel("Status", { exact: true }).selectOption("succeeded")
      await page.getByLabel("Webhook", { exact: true }).selectOption("")
      await page.getByRole("button", { name: "Apply filters" }).click()
      await page.waitForURL(/status=succeeded/)
      // Every row found succeeded (those of the other webhooks: the flaky one's are dead).
      await expect.poll(
        async () => [...new Set(await page.locator("tbody.delivery td[data-label='Status']").allTextContents())]
      ).toEqual(["succeeded"])

      // The receiver is back: recover the window, and both arrive again with their webhook-ids.
      up = true
      await page.goto(`${hub.baseUrl}/dashboard/webhooks/${id}`)
      const recover = page.getByRole("region", { name: "Recover" })
      await recover.getByRole("button", { name: "Recover failed deliveries" }).click()
      await recover.getByText("Queued 2 deliveries again, each with its original webhook-id.").waitFor()
      const again = (await flaky.received(10)).slice(8)
      expect(new Set(again.map((r) => String(r.headers["webhook-id"])))).toEqual(webhookIds)
      await health.locator("li.stat-ok").filter({ hasText: /^2 succeeded/ }).waitFor()
      await health.getByText("Not failing").waitFor()
      expect(await health.getByText("None recorded").count()).toBe(0)
      await recover.scrollIntoViewIfNeeded()
      await screenshot(page, "webhook-recover")
      // A repeat queues nothing: what was recovered succeeded.
      await recover.getByRole("button", { name: "Recover failed deliveries" }).click()
      await recover.getByText("Nothing to recover").waitFor()
    } finally {
      await flaky.close()
    }
  })

  it("says in words why the hub turned a webhook off (a receiver that answered 410 Gone)", async () => {
    const gone = await startReceiver(() => 410)
    try {
      const created = await hub.api("POST", "/api/webhooks", hub.instanceToken, {
        url: gone.url,
        name: "gone",
        events: ["security"]
      })
      expect(created.status).toBe(201)
      const id = String(record(created.body).id)
      const page = await open()
      await signIn(page, hub.instanceToken)
      await go(page, "Webhooks")
      const simulated = await hub.api("POST", "/sandbox/changes", hub.instanceToken, {
        changes: [{ field: "security", value: { event: "PIN_CHANGED" } }]
      })
      expect(simulated.status).toBe(200)
      await gone.received(1)
      // The list reads the record again on the event (the live feed), or on a reload.
      await expect.poll(async () => {
        const answer = await hub.api("GET", `/api/webhooks/${id}`, hub.instanceToken)
        return record(answer.body).disabled_reason
      }, { timeout: 10_000, interval: 200 }).toBe("gone_410")
      await page.reload()
      const row = page.getByRole("row").filter({ hasText: "gone" })
      await row.getByText("inactive · receiver gone (410)").waitFor()
      await row.getByText("1 dead").waitFor()
      await screenshot(page, "webhooks", true)
      await page.getByRole("link", { name: "gone", exact: true }).click()
      await page.getByText(
        "The receiver answered 410 Gone, so the hub turned the webhook off. Activate it under Settings to deliver again."
      ).waitFor()
    } finally {
      await gone.close()
    }
  })

  it("filters the message history, pages through it, and shows a message's status timeline", async () => {
    const page = await open()
    await signIn(page, hub.instanceToken)
    // Sent once the live feed is open, so it sees the message's status events.
    await go(page, "Live events")
    await page.getByText("connected", { exact: true }).waitFor()
    await go(page, "Messages")
    const wamid = await sendText("track me")
    await simulateInbound("an inbound one")
    // More than two pages of ten.
    for (let i = 0; i < 20; i++) await sendText(`filler ${i}`)

    await page.getByLabel("Direction", { exact: true }).selectOption("inbound")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.waitForURL(/direction=inbound/)
    await page.getByRole("cell", { name: "← inbound" }).first().waitFor()
    expect(await page.getByRole("cell", { name: "→ outbound" }).count()).toBe(0)

    await page.getByRole("button", { name: "Reset" }).click()
    await page.getByLabel("Per page", { exact: true }).selectOption("10")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.getByText(/Page 1 of \d+ · \d+ messages/).waitFor()
    const firstPage = await upstreamIds(page)
    // Next and Previous follow the answers' cursors; Previous from the second page is the plain first page.
    await page.getByRole("button", { name: "Next →" }).click()
    await page.getByText(/Page 2 of \d+/).waitFor()
    expect(new URL(page.url()).searchParams.get("page")).toBe("2")
    expect(new URL(page.url()).searchParams.get("before")).toMatch(/^[A-Za-z0-9_-]+$/)
    const secondPage = await upstreamIds(page)
    expect(secondPage).toHaveLength(10)
    expect(secondPage.filter((id) => firstPage.includes(id))).toEqual([])
    await page.getByRole("button", { name: "Next →" }).click()
    await page.getByText(/Page 3 of \d+/).waitFor()
    await page.getByRole("button", { name: "← Previous" }).click()
    await page.getByText(/Page 2 of \d+/).waitFor()
    expect(new URL(page.url()).searchParams.get("after")).toMatch(/^[A-Za-z0-9_-]+$/)
    await expect.poll(() => upstreamIds(page)).toEqual(secondPage)
    await page.getByRole("button", { name: "← Previous" }).click()
    await page.getByText(/Page 1 of \d+/).waitFor()
    expect([...new URL(page.url()).searchParams.keys()].sort()).toEqual(["limit"])
    await expect.poll(() => upstreamIds(page)).toEqual(firstPage)

    await page.getByRole("button", { name: "Reset" }).click()
    await page.getByLabel("Status", { exact: true }).selectOption("read")
    await page.getByLabel("Upstream message id", { exact: true }).fill(wamid)
    await page.getByRole("button", { name: "Apply filters" }).click()
    // The sandbox reads the message a moment after sending it: refresh until it shows as read.
    const row = page.getByRole("row").filter({ hasText: wamid })
    await expect.poll(async () => {
      await page.getByRole("button", { name: "Refresh" }).click()
      return row.count()
    }, { timeout: 15_000, interval: 300 }).toBe(1)
    await page.getByText("Page 1 of 1 · 1 message").waitFor()

    await row.getByRole("button", { name: `Timeline of ${wamid}` }).click()
    const timeline = page.getByRole("region", { name: "Status timeline" })
    for (const step of ["pending", "sent", "delivered", "read"]) {
      await timeline.getByText(step, { exact: true }).waitFor()
    }
    // Each step's time comes from the record: sent, delivered and read each show theirs.
    await timeline.getByText("Status event recorded").first().waitFor()
    expect(await timeline.getByText("Status event recorded").count()).toBe(3)
    expect(await timeline.locator("time").count()).toBe(4)
    // The timeline stays open while the filters change.
    await page.getByRole("button", { name: "Reset" }).click()
    await page.getByLabel("Per page", { exact: true }).selectOption("10")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.getByText(/Page 1 of \d+ · \d+ messages/).waitFor()
    await timeline.waitFor()
    await screenshot(page, "messages", true)
  })

  it("shows a username user by name and business-scoped id, and filters the history by person", async () => {
    const userId = "US.13491208655302741918"
    const inbound = await hub.api("POST", "/sandbox/inbound", hub.instanceToken, {
      user_id: userId,
      username: "pablomorales",
      type: "text",
      text: { body: "Hi, it's Pablo" }
    })
    expect(inbound.status).toBe(200)
    const reply = await hub.api("POST", "/api/messages", hub.instanceToken, {
      recipient: userId,
      type: "text",
      text: { body: "Hello Pablo" }
    })
    expect(reply.status).toBe(200)
    await sendText("someone else")
    const page = await open()
    await signIn(page, hub.instanceToken)
    await go(page, "Messages")
    const row = page.getByRole("row").filter({ hasText: String(record(inbound.body).id) })
    await row.getByText("@pablomorales").waitFor()
    // No number is known for them: the row shows their business-scoped user id, a link to every message with them.
    await row.getByRole("link", { name: `Every message with ${userId}` }).click()
    await page.waitForURL((url) => url.searchParams.get("user") === userId)
    await page.getByText("Page 1 of 1 · 2 messages").waitFor()
    expect(await page.getByRole("row").filter({ hasText: "15551234567" }).count()).toBe(0)
    expect(await page.getByLabel("Person", { exact: true }).inputValue()).toBe(userId)
    await screenshot(page, "messages-person")
    // Typed by hand, a number they are not known by finds nobody's messages but that number's.
    await page.getByLabel("Person", { exact: true }).fill("15551234567")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.waitForURL(/user=15551234567/)
    await page.getByRole("cell", { name: "→ outbound" }).first().waitFor()
    expect(await page.getByText("@pablomorales").count()).toBe(0)
  })

  it("simulates an inbound message in the sandbox and watches it arrive among the live events", async () => {
    const page = await open()
    await signIn(page, hub.instanceToken)
    await go(page, "Sandbox")
    await page.getByLabel("Text", { exact: true }).fill("Hello from the browser")
    await page.getByRole("button", { name: "Simulate inbound message" }).click()
    await page.getByText(/^Simulated wamid\.\S+: \d+ webhook deliver(y|ies) queued\.$/).waitFor()
    await screenshot(page, "sandbox")

    await go(page, "Live events")
    await page.getByText("connected", { exact: true }).waitFor()
    await page.getByText("Inbound text from 16505551234: “Hello from the browser”").waitFor()
    // And one that arrives while the page is open.
    const wamid = await simulateInbound("Arriving live")
    await page.getByText("Inbound text from 16505551234: “Arriving live”").waitFor()
    await page.getByRole("listitem").filter({ hasText: "Arriving live" }).getByText("Payload").click()
    await page.getByText(wamid).first().waitFor()
    await screenshot(page, "live-events")
  })

  it("on a phone-sized screen the menu folds away and rows become cards", async () => {
    await sendText("seen on a phone")
    const page = await open({ viewport: PHONE, mobile: true })
    await signIn(page, hub.organizationToken)
    const menu = page.getByRole("button", { name: "Menu" })
    await menu.waitFor()
    expect(await page.getByRole("navigation", { name: "Pages" }).isVisible()).toBe(false)
    await menu.click()
    expect(await menu.getAttribute("aria-expanded")).toBe("true")
    await go(page, "Messages")
    await page.getByRole("cell", { name: "15551234567" }).first().waitFor()
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(PHONE.width)
    await screenshot(page, "messages-phone")

    // A webhook's page: its health, filters and headers fit the screen too.
    await page.getByRole("button", { name: "Menu" }).click()
    await go(page, "Webhooks")
    await page.getByRole("link", { name: "local receiver" }).click()
    const health = page.getByRole("region", { name: "Health" })
    await health.getByText("Attempts in the last 24 hours").waitFor()
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(PHONE.width)
    await health.scrollIntoViewIfNeeded()
    await screenshot(page, "webhook-phone")
    await page.getByRole("button", { name: "Menu" }).click()
    await go(page, "Deliveries")
    await page.locator("tbody.delivery").first().waitFor()
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(PHONE.width)
  })

  it("signs out: the token leaves the tab, and the dashboard asks for one again", async () => {
    const page = await open()
    await signIn(page, hub.organizationToken)
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByText("Signed out: the token was removed from this tab.").waitFor()
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length])).toEqual([0, 0])
    await page.reload()
    await page.getByLabel("Token", { exact: true }).waitFor()
    expect(await page.getByRole("button", { name: "Sign out" }).count()).toBe(0)
  })
})
