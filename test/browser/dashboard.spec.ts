/**
 * The dashboard end to end: a real hub (`bun src/main.ts serve`, sandbox upstream), Debian's
 * Chromium driven by playwright-core, a webhook receiver on 127.0.0.1. Each test signs in on a
 * page of its own and writes a screenshot of what it shows into docs/screenshots/. Waits are on
 * what the page or the receiver shows (locators, the receiver's arrivals), never on a timer.
 */
import type { Browser, Page } from "playwright-core"
import { Webhook } from "standardwebhooks"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { launchBrowser, openPage, type OpenedPage, PHONE, screenshot } from "./support/Browser.js"
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

const record = (u: unknown): Record<string, unknown> => (typeof u === "object" && u !== null && !Array.isArray(u) ? Object.fromEntries(Object.entries(u)) : {})

const sendText = async (body: string) => {
  const sent = await hub.api("POST", "/api/messages", hub.instanceToken, { to: "15551234567", type: "text", text: { body } })
  expect(sent.status).toBe(200)
  const messages = record(sent.body).messages
  return String(Array.isArray(messages) ? record(messages[0]).id : "")
}

const simulateInbound = async (text: string) => {
  const simulated = await hub.api("POST", "/sandbox/inbound", hub.instanceToken, { from: "16505551234", type: "text", text: { body: text } })
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
    expect([...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0])).toEqual([expect.stringMatching(/^<script type="module" src="\/dashboard\/assets\/app-[0-9a-f]{12}\.js">$/)])
    expect(html).not.toMatch(/<script\b[^>]*>[^<]/)
    expect(html).not.toMatch(/ style=/)
    expect(html).not.toMatch(/https?:\/\//)

    for (const [asset, type] of [[/src="([^"]+\.js)"/, "text/javascript"], [/href="([^"]+\.css)"/, "text/css"]] as const) {
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
    for (const text of [hub.instanceId, "100000000000001", "200000000000001", "80 messages/s"]) await row.getByText(text).waitFor()
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
    await screenshot(page, "webhooks")
    await page.getByRole("link", { name: "Open “local receiver”" }).click()
    await page.getByRole("heading", { level: 1, name: /local receiver/ }).waitFor()

    const wamid = await simulateInbound("Where is my order?")
    const [first, second] = await receiver.received(2)
    // Refused once, then delivered: the same delivery (webhook-id), signed with the secret the page showed.
    expect(first?.headers["webhook-id"]).toBe(second?.headers["webhook-id"])
    const headers = { "webhook-id": String(second?.headers["webhook-id"]), "webhook-timestamp": String(second?.headers["webhook-timestamp"]), "webhook-signature": String(second?.headers["webhook-signature"]) }
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
    const created = await hub.api("POST", "/api/webhooks", hub.instanceToken, { url: "http://127.0.0.1:9/unused", name: "to change" })
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
    expect((await hub.api("GET", `/api/webhooks/${String(record(created.body).id)}`, hub.instanceToken)).status).toBe(404)
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
    for (let i = 0; i < 10; i++) await sendText(`filler ${i}`)

    await page.getByLabel("Direction", { exact: true }).selectOption("inbound")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.waitForURL(/direction=inbound/)
    await page.getByRole("cell", { name: "← inbound" }).first().waitFor()
    expect(await page.getByRole("cell", { name: "→ outbound" }).count()).toBe(0)

    await page.getByRole("button", { name: "Reset" }).click()
    await page.getByLabel("Per page", { exact: true }).selectOption("10")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.getByText(/Page 1 of \d+ · \d+ messages/).waitFor()
    await page.getByRole("button", { name: "Next →" }).click()
    await page.getByText(/Page 2 of \d+/).waitFor()
    expect(new URL(page.url()).searchParams.get("page")).toBe("2")

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
    for (const step of ["pending", "sent", "delivered", "read"]) await timeline.getByText(step, { exact: true }).waitFor()
    await timeline.getByText("Status event seen on the live feed").first().waitFor()
    // The timeline stays open while the filters change.
    await page.getByRole("button", { name: "Reset" }).click()
    await page.getByLabel("Per page", { exact: true }).selectOption("10")
    await page.getByRole("button", { name: "Apply filters" }).click()
    await page.getByText(/Page 1 of \d+ · \d+ messages/).waitFor()
    await timeline.waitFor()
    await screenshot(page, "messages", true)
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
