/**
 * Debian's Chromium (/usr/bin/chromium, installed with apt-get; never a downloaded browser) driven
 * by playwright-core, with the flags this machine needs (see /work/shared/research/browser.md).
 * Every page records the requests it makes and the errors its console reports, so a test can check
 * that nothing left the hub's origin and that the Content-Security-Policy refused nothing.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

export const launchBrowser = () =>
  chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run"
    ]
  })

export interface OpenedPage {
  readonly page: Page
  readonly context: BrowserContext
  /** Requests to anywhere but the hub. */
  readonly foreignRequests: ReadonlyArray<string>
  /** Console errors and uncaught exceptions (a CSP violation is reported as one). */
  readonly errors: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

const LAPTOP = { width: 1280, height: 800 }
export const PHONE = { width: 390, height: 844 }

export const openPage = async (
  browser: Browser,
  baseUrl: string,
  options: {
    readonly viewport?: { readonly width: number; readonly height: number }
    readonly mobile?: boolean
    /** Lets a test inject a script of its own (axe); the CSP stays on for every other page. */
    readonly bypassCSP?: boolean
  } = {}
): Promise<OpenedPage> => {
  const context = await browser.newContext({
    viewport: options.viewport ?? LAPTOP,
    isMobile: options.mobile ?? false,
    hasTouch: options.mobile ?? false,
    deviceScaleFactor: 1,
    permissions: ["clipboard-read", "clipboard-write"],
    colorScheme: "light",
    reducedMotion: "reduce",
    bypassCSP: options.bypassCSP ?? false
  })
  const page = await context.newPage()
  const foreignRequests: Array<string> = []
  const errors: Array<string> = []
  page.on("request", (request) => {
    const url = request.url()
    if (!url.startsWith(`${baseUrl}/`) && !url.startsWith("data:")) foreignRequests.push(url)
  })
  page.on("console", (message) => {
    // Chromium reports every 4xx answer to a fetch as a console error; the tests provoke the API's refusals on purpose.
    if (
      message.type() === "error" &&
      !/^Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())
    ) {
      errors.push(message.text())
    }
  })
  page.on("pageerror", (error) => errors.push(String(error)))
  return { page, context, foreignRequests, errors, close: () => context.close() }
}

const screenshots = join(import.meta.dirname, "..", "..", "..", "docs", "screenshots")

/** Writes docs/screenshots/<name>.png (the viewport, or the whole page). */
export const screenshot = async (page: Page, name: string, fullPage = false) => {
  mkdirSync(screenshots, { recursive: true })
  // No hover left on whatever was clicked last.
  await page.mouse.move(0, 0)
  // The caret blinks and times tick: screenshots are of a settled page.
  await page.screenshot({ path: join(screenshots, `${name}.png`), fullPage, animations: "disabled", caret: "hide" })
}
