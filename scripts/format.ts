/**
 * The formatter: dprint's TypeScript plugin (a Wasm module from the registry) run through
 * `@dprint/formatter`, with the settings of dprint.json (Effect's conventions, line width 120).
 * The dprint command line is not used: its binaries come as one package per platform, which the
 * registry this project installs from does not all carry, so `npm ci` could not install from the lock.
 *
 *   bun scripts/format.ts          formats every file dprint.json includes, in place
 *   bun scripts/format.ts --check  writes nothing; lists the files not formatted and exits 1 if any
 */
import { createFromBuffer } from "@dprint/formatter"
import { getPath } from "@dprint/typescript"
import { Glob } from "bun"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dir, "..")
const check = process.argv.includes("--check")

interface Settings {
  readonly lineWidth: number
  readonly indentWidth: number
  readonly typescript: Record<string, unknown>
  readonly includes: ReadonlyArray<string>
  readonly excludes: ReadonlyArray<string>
}

const isSettings = (value: unknown): value is Settings =>
  typeof value === "object" && value !== null && "includes" in value && "typescript" in value

const parsed: unknown = JSON.parse(readFileSync(join(root, "dprint.json"), "utf8"))
if (!isSettings(parsed)) throw new Error("dprint.json lacks includes or typescript settings")
const settings = parsed

const formatter = createFromBuffer(readFileSync(getPath()))
formatter.setConfig({ lineWidth: settings.lineWidth, indentWidth: settings.indentWidth }, settings.typescript)

const excluded = settings.excludes.map((pattern) => new Glob(pattern))
const files = [
  ...new Set(settings.includes.flatMap((pattern) => [...new Glob(pattern).scanSync({ cwd: root })]))
].filter((file) => !excluded.some((glob) => glob.match(file))).sort()

const unformatted: Array<string> = []
for (const file of files) {
  const path = join(root, file)
  const text = readFileSync(path, "utf8")
  const formatted = formatter.formatText({ filePath: path, fileText: text })
  if (formatted === text) continue
  unformatted.push(file)
  if (!check) writeFileSync(path, formatted)
}

if (check && unformatted.length > 0) {
  console.error(
    `${unformatted.length} files are not formatted (npm run format formats them):\n${unformatted.join("\n")}`
  )
  process.exit(1)
}
console.log(
  check
    ? `${files.length} files formatted as dprint.json says`
    : `${unformatted.length} of ${files.length} files formatted`
)
