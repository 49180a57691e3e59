/**
 * Builds the dashboard: bundles src/Dashboard/ui (Preact, TSX, CSS) with Bun's bundler into one
 * minified script and one stylesheet, and writes them into src/Dashboard/generated/assets.ts, which
 * the server imports. That module is a build output (git-ignored): `npm ci` writes it (the `prepare`
 * script) and `npm run build` writes it again before compiling, so the single binary carries the
 * dashboard and serves it offline, with no file beside it.
 *
 * The bundle holds the dashboard, its browser libraries and the few pure modules of the server it
 * shares (PURE_SERVER_MODULES): the build fails if anything else is bundled, so a stray import
 * cannot carry server code (or Effect, or a secret's handling) to the browser.
 */
import { createHash } from "node:crypto"
import { mkdirSync, writeFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"

const here = import.meta.dirname

/** Server modules the dashboard imports at run time: data and pure functions, importing nothing but types. */
const PURE_SERVER_MODULES: ReadonlySet<string> = new Set(["src/Domain/EventKinds.ts", "src/Domain/Vocabulary.ts"])
/** The browser libraries it bundles. */
const LIBRARIES = ["node_modules/preact/", "node_modules/eventsource-parser/"]

const allowed = (path: string) =>
  path.startsWith("src/Dashboard/ui/") || PURE_SERVER_MODULES.has(path) ||
  LIBRARIES.some((library) => path.startsWith(library))

const result = await Bun.build({
  entrypoints: [join(here, "ui", "main.tsx")],
  target: "browser",
  format: "esm",
  minify: true,
  metafile: true,
  define: { "process.env.NODE_ENV": JSON.stringify("production") }
})
if (!result.success) {
  for (const log of result.logs) console.error(log)
  process.exit(1)
}

// The metafile names inputs relative to the working directory: named here from the repository's root.
const root = join(here, "..", "..")
const bundled = Object.keys(result.metafile?.inputs ?? {}).map((path) => relative(root, resolve(path)))
const foreign = bundled.filter((path) => !allowed(path))
if (bundled.length === 0 || foreign.length > 0) {
  console.error(
    `the dashboard bundle may hold only src/Dashboard/ui/, ${[...PURE_SERVER_MODULES, ...LIBRARIES].join(", ")}; ` +
      `it holds: ${foreign.slice(0, 5).join(", ") || "(no inputs listed)"}${
        foreign.length > 5 ? ` and ${foreign.length - 5} more` : ""
      }`
  )
  process.exit(1)
}

const texts = await Promise.all(
  result.outputs.map(async (output) => ({ path: output.path, text: await output.text() }))
)
const script = texts.filter((o) => o.path.endsWith(".js"))
const styles = texts.filter((o) => o.path.endsWith(".css"))
if (script.length !== 1 || styles.length !== 1) {
  console.error(`expected one script and one stylesheet, got: ${texts.map((o) => o.path).join(", ")}`)
  process.exit(1)
}
const js = script[0]?.text ?? ""
const css = styles[0]?.text ?? ""
const version = createHash("sha256").update(js).update(css).digest("hex").slice(0, 12)

const generated = join(here, "generated")
mkdirSync(generated, { recursive: true })
writeFileSync(
  join(generated, "assets.ts"),
  [
    "// Written by src/Dashboard/build.ts (npm ci, npm run build); do not edit.",
    `export const version = ${JSON.stringify(version)}`,
    `export const script = ${JSON.stringify(js)}`,
    `export const stylesheet = ${JSON.stringify(css)}`,
    ""
  ].join("\n")
)
console.log(
  `dashboard built: ${(js.length / 1024).toFixed(1)} KB script, ${
    (css.length / 1024).toFixed(1)
  } KB stylesheet (${version})`
)
