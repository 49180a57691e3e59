/**
 * Writes the hub's OpenAPI document (what GET /openapi.json serves) to the given file, or to stdout:
 * `npm run lint:openapi` lints it with Redocly (see redocly.yaml).
 */
import { OpenApi } from "@effect/platform"
import { mkdirSync, writeFileSync } from "node:fs"
import { dirname } from "node:path"
import { HubApi } from "../src/Api.js"

const document = `${JSON.stringify(OpenApi.fromApi(HubApi), null, 2)}\n`
const target = process.argv[2]
if (target === undefined) {
  process.stdout.write(document)
} else {
  mkdirSync(dirname(target), { recursive: true })
  writeFileSync(target, document)
}
