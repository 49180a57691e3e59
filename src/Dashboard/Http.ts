/**
 * The dashboard, served by the hub itself: GET /dashboard (and every client-side route under it)
 * answers the page, /dashboard/assets/ the script and stylesheet built into the binary
 * (src/Dashboard/build.ts), and GET / redirects to /dashboard. The page talks to the public API only,
 * with the token its user signs in with. Nothing is fetched from elsewhere: the Content-Security-Policy
 * allows this origin only, and no inline script or style. /docs answers with the same headers.
 */
import { HttpApiBuilder, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { HubConfig } from "../Config.js"
import { script, stylesheet, version } from "./generated/assets.js"

const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join("; ")

const scriptPath = `/dashboard/assets/app-${version}.js`
const stylesheetPath = `/dashboard/assets/app-${version}.css`

/** The page: the upstream mode is named so the sandbox's own page shows only where it exists. */
const pageHtml = (upstream: string) =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<meta name="hub-upstream" content="${upstream === "sandbox" ? "sandbox" : "graph"}">
<title>Messaging Hub</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${stylesheetPath}">
<script type="module" src="${scriptPath}"></script>
</head>
<body>
<div id="app"><noscript>The dashboard needs JavaScript.</noscript></div>
</body>
</html>
`

/** Every page the hub serves a browser (the dashboard's, the API docs') answers with these. */
const securityHeaders = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY"
}

/** The executable inline blocks of a page (`<script>` that is not JSON data, `<style>`), each as a CSP source. */
const inlineSources = (html: string, tag: "script" | "style") =>
  [...html.matchAll(new RegExp(`<${tag}(?![^>]*type="application/json")[^>]*>([\\s\\S]*?)</${tag}>`, "g"))].map((
    match
  ) => `'sha256-${createHash("sha256").update(match[1] ?? "").digest("base64")}'`)

/**
 * The security headers of a page whose script and style are inline (Swagger UI at /docs, as
 * @effect/platform writes it): the dashboard's policy, with exactly those blocks allowed by their
 * hash instead of 'self' files, so no other inline script can run.
 */
const inlinePageSecurityHeaders = (html: string): Record<string, string> => ({
  ...securityHeaders,
  "content-security-policy": CONTENT_SECURITY_POLICY
    .replace("script-src 'self'", `script-src ${inlineSources(html, "script").join(" ")}`)
    .replace("style-src 'self'", `style-src ${inlineSources(html, "style").join(" ")}`)
})

/**
 * /docs with the dashboard's security headers: the page HttpApiSwagger serves (static for the
 * process), its headers computed from its body once.
 */
export const DocsSecurityHeadersLive = HttpApiBuilder.middleware(Effect.sync(() => {
  let docsHeaders: Record<string, string> | undefined
  return (app: HttpApp.Default) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const response = yield* app
      if (
        request.url.split("?")[0] !== "/docs" || response.status !== 200 || response.body._tag !== "Uint8Array"
      ) return response
      docsHeaders ??= inlinePageSecurityHeaders(new TextDecoder().decode(response.body.body))
      return HttpServerResponse.setHeaders(response, docsHeaders)
    })
}))

/** Assets are named by their content's hash, so a browser may keep them for good. */
const asset = (body: string, contentType: string) =>
  HttpServerResponse.text(body, {
    contentType,
    headers: { ...securityHeaders, "cache-control": "public, max-age=31536000, immutable" }
  })

const notFound = (path: string) =>
  HttpServerResponse.unsafeJson({ statusCode: 404, message: `No dashboard asset at ${path}`, error: "not_found" }, {
    status: 404
  })

export const DashboardHttpLive = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const config = yield* HubConfig
    const page = HttpServerResponse.text(pageHtml(config.upstream), {
      contentType: "text/html; charset=utf-8",
      headers: { ...securityHeaders, "cache-control": "no-cache" }
    })
    const scriptAnswer = asset(script, "text/javascript; charset=utf-8")
    const stylesheetAnswer = asset(stylesheet, "text/css; charset=utf-8")

    yield* router.get("/", Effect.succeed(HttpServerResponse.redirect("/dashboard", { status: 302 })))
    yield* router.get("/dashboard", Effect.succeed(page))
    yield* router.get(
      "/dashboard/*",
      Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
        const path = request.url.split("?")[0] ?? ""
        if (path === scriptPath) return scriptAnswer
        if (path === stylesheetPath) return stylesheetAnswer
        // Client-side routes are the page; unknown assets are not.
        return path.startsWith("/dashboard/assets/") ? notFound(path) : page
      })
    )
  })
)
