/**
 * Every source path the code's comments and the docs name must exist: a renamed or deleted file
 * leaves no stale pointer behind. Reads the text files under src/, test/, scripts/ and docs/ and the
 * README; a path is a file or folder under src, test, scripts or docs, or a file under src named the
 * way comments name them (its folder and file, capitalised). Prints each missing path with where it
 * is named; exits 1 if any.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative } from "node:path"

const root = join(import.meta.dir, "..")

const TEXT = /\.(ts|tsx|md)$/
const SKIP = new Set(["node_modules", "generated", "dist", "data"])

const filesUnder = (folder: string): ReadonlyArray<string> =>
  readdirSync(folder).flatMap((name) => {
    if (SKIP.has(name)) return []
    const path = join(folder, name)
    return statSync(path).isDirectory() ? filesUnder(path) : TEXT.test(name) ? [path] : []
  })

/** A rooted path to a file (with its extension) or a folder (with its slash), or a file named from src/ as comments do. */
const NAMED_PATH =
  /(?<![\w./-])((?:src|test|scripts|docs)\/[\w./-]*(?:\.\w+|\/)|[A-Z]\w*\/(?:[A-Z]\w*\/)*[A-Z]\w*\.tsx?)(?![\w/-])/g

/** Paths that name a pattern or an example, not a file. */
const isPattern = (path: string) => /[*<>{}…]/.test(path) || path.endsWith("/NNNN_name.ts")

const exists = (path: string) => {
  const rooted = /^(src|test|scripts|docs)\//.test(path)
  return existsSync(join(root, rooted ? path : join("src", path)))
}

const files = [
  ...["src", "test", "scripts", "docs"].flatMap((folder) => filesUnder(join(root, folder))),
  join(root, "README.md")
]
  .filter((file) => file !== import.meta.path)
const missing: Array<string> = []
for (const file of files) {
  const lines = readFileSync(file, "utf8").split("\n")
  lines.forEach((line, index) => {
    for (const match of line.matchAll(NAMED_PATH)) {
      const path = (match[1] ?? "").replace(/\.$/, "")
      if (!isPattern(path) && !exists(path)) missing.push(`${relative(root, file)}:${index + 1}: ${path}`)
    }
  })
}

if (missing.length > 0) {
  console.error(`${missing.length} named paths do not exist:\n${missing.join("\n")}`)
  process.exit(1)
}
console.log(`every named path exists (${files.length} files read)`)
