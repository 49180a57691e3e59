/**
 * The overview in the dashboard, end to end: a real hub (sandbox upstream, statuses 300 ms apart) with two
 * webhooks, one of which refuses every first attempt. After sends (one refused by the sandbox, one queued
 * for later) an organization token signs in and lands on the overview: three charts, each with its table,
 * the window's totals, another window chosen, and the page read again on its own while open. Screenshot
 * into docs/screenshots/overview.png.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { launchBrowser, type OpenedPage, openPage, screenshot } from "./support/Browser.js"
import { type RunningHub, startHub } from "./support/Hub.js"
import { type Receiver, startReceiver } from "./support/Receiver.js"

let hub: RunningHub
let browser: Browser
const receivers: Array<Receiver> = []
const opened: Array<OpenedPage> = []

/** The sandbox refuses sends to this number at once (code 131030, recipient not allowed). */
const REFUSED = "999131030000"

beforeAll(async () => {
  hub = await startHub({ HUB_SANDBOX_STATUS_DELAY: "300ms", HUB_WEBHOOK_RETRY: "200ms" })
  browser = await launchBrowser()
})

afterAll(async () => {
  await browser?.close()
  for (const receiver of receivers) await receiver.close()
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

const webhook = async (name: string, status: (index: number) => number) => {
  const receiver = await startReceiver(status)
  receivers.push(receiver)
  const created = await hub.api("POST", "/api/webhooks", hub.instanceToken, { url: receiver.url, name })
  expect(created.status).toBe(201)
  return receiver
}

const send = async (to: string, json: Record<string, unknown> = {}) =>
  (await hub.api("POST", "/api/messages", hub.instanceToken, { to, type: "text", text: { body: "hello" }, ...json }))
    .status

/** The total stat labelled `label` (such as "sends"). */
const total = (page: Page, label: string) =>
  page.locator(".stats li").filter({ hasText: new RegExp(`^[\\d,]+ ${label} `) }).locator(".stat-value")

describe("the overview", () => {
  it("opens after sign-in with sends, deliveries and the queue per minute, each chart with its table", async () => {
    const taking = await webhook("taking", () => 200)
    // Every other request refused: first attempts fail, their retries (200 ms later) mostly succeed.
    const flaky = await webhook("flaky", (index) => (index % 2 === 0 ? 503 : 200))
    for (const to of ["16505550101", "16505550102", "16505550103", "16505550104"]) expect(await send(to)).toBe(200)
    expect(await send(REFUSED)).toBe(400)
    const later = new Date(Date.now() + 3600_000).toISOString()
    expect(await send("16505550105", { send_at: later })).toBe(202)
    // Each accepted send is sent, delivered and read: 12 events for each webhook.
    await taking.received(12)
    await flaky.received(12)

    const tab = await openPage(browser, hub.baseUrl)
    opened.push(tab)
    const page = tab.page
    // The page's timers are the test's, so its reading every 30 s is seen without waiting for it.
    await page.clock.install()
    await page.goto(`${hub.baseUrl}/dashboard`)
    await page.getByLabel("Token", { exact: true }).fill(hub.organizationToken)
    await page.getByRole("button", { name: "Sign in" }).click()
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor()
    expect(new URL(page.url()).pathname).toBe("/dashboard/overview")
    const nav = page.getByRole("navigation", { name: "Pages" })
    expect((await nav.getByRole("link").allTextContents())[0]).toBe("Overview")
    expect(await nav.getByRole("link", { name: "Overview" }).getAttribute("aria-current")).toBe("page")

    // The window's totals: 6 sends (the refused one failed), webhook attempts of both receivers.
    await expect(total(page, "sends").textContent()).resolves.toBe("6")
    await expect(total(page, "failed sends").textContent()).resolves.toBe("1")
    expect(Number(await total(page, "deliveries").textContent())).toBeGreaterThanOrEqual(12)
    expect(Number(await total(page, "failed attempts").textContent())).toBeGreaterThanOrEqual(1)

    // Three charts, each an image described in words, with its numbers as a table.
    const sends = page.getByRole("region", { name: "Sends per minute by status" })
    const chart = sends.getByRole("img", { name: /Sends per minute by status, over the last hour/ })
    await chart.waitFor()
    expect(await chart.locator("desc").textContent()).toMatch(/^60 samples from .+ Now: /)
    await sends.getByText("The samples as a table").click()
    const table = sends.getByRole("region", { name: /Sends per minute by status; each row stands until the next/ })
    expect(await table.getByRole("columnheader").allTextContents()).toEqual([
      "Minute",
      "pending",
      "sent",
      "delivered",
      "read",
      "failed"
    ])
    // The minutes with the sends in them have counts; the oldest minutes (the last row, newest first) are zeros.
    const cells = await table.locator("tbody tr").evaluateAll((trs) =>
      trs.map((tr) => Array.from(tr.querySelectorAll("td"), (td) => td.textContent ?? ""))
    )
    expect(cells.some((row) => row.some((cell) => cell !== "0"))).toBe(true)
    expect(cells[cells.length - 1]).toEqual(["0", "0", "0", "0", "0"])
    const deliveries = page.getByRole("region", { name: "Webhook deliveries per minute by outcome" })
    await deliveries.getByRole("img", { name: /Webhook delivery attempts per minute by outcome/ }).waitFor()
    expect(await deliveries.locator(".legend li").allTextContents()).toEqual([
      expect.stringMatching(/^succeeded: \d+$/),
      expect.stringMatching(/^failed \(retried\): \d+$/),
      expect.stringMatching(/^dead \(given up\): \d+$/)
    ])
    const queue = page.getByRole("region", { name: "Send queue depth" })
    await queue.getByRole("img", { name: /Send queue depth per minute/ }).waitFor()
    // The send queued for later waits: the queue now, in the chart's last minute.
    expect(await queue.locator(".legend li").allTextContents()).toEqual(["queued: 1"])
    await screenshot(page, "overview", true)

    // Another window: every chart says it.
    await page.getByLabel("Window").selectOption({ label: "Last 3 hours" })
    await sends.getByRole("img", { name: /over the last 3 hours/ }).waitFor()
    expect(await sends.getByRole("img").locator("desc").textContent()).toMatch(/^180 samples/)

    // Read again on its own while open: a send made now appears after the next reading.
    expect(await send("16505550106")).toBe(200)
    await page.clock.fastForward(30_000)
    await total(page, "sends").getByText("7", { exact: true }).waitFor()
  })
})
