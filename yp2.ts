import { parse } from "yaml"
import { readFileSync } from "node:fs"
const doc = parse(readFileSync("/work/shared/reference/meta-openapi/business-messaging-api_v23.0.yaml", "utf8"))
const op = doc.paths[process.argv[2]!][process.argv[3]!]
console.log(JSON.stringify(op.parameters?.map((p: any) => [p.name ?? p.$ref, p.in, p.example ?? p.examples]), null, 0))
for (const [code, r] of Object.entries<any>(op.responses)) {
  for (const [ct, c] of Object.entries<any>(r.content ?? {})) {
    for (const [k, e] of Object.entries<any>(c.examples ?? {})) console.log(code, ct, "|", k, "|", JSON.stringify(e.value).slice(0, 1500))
    if (c.example) console.log(code, ct, "| example |", JSON.stringify(c.example).slice(0, 1500))
  }
}
