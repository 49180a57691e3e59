/**
 * Builds the dashboard: bundles src/Dashboard/ui (Preact, TSX, CSS) with Bun's bundler into one
 * minified script and one stylesheet, and writes them into src/Dashboard/generated/assets.ts, which
 * the server imports. That module is a build output (git-ignored): `npm ci` writes it (the `prepare`
 * script) and `npm run build` writes it again before compiling, so the single binary carries the
 * dashboard and serves it offline, with no file beside it.
 */
import { createHash } from "node:crypto"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const here = import.meta.dirname
const result = await Bun.build({
  entrypoints: [join(here, "ui", "main.tsx")],
  target: "browser",
  format: "esm",
  minify: true,
  define: { "process.env.NODE_ENV": JSON.stringify("production") }
})
if (!result.success) {
  for (const log of result.logs) console.error(log)
  process.exit(1)
}

const texts = await Promise.all(result.outputs.map(async (output) => ({ path: output.path, text: await output.text() })))
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
console.log(`dashboard built: ${(js.length / 1024).toFixed(1)} KB script, ${(css.length / 1024).toFixed(1)} KB stylesheet (${version})`)
