import { parse } from "yaml"
import { readFileSync } from "node:fs"
const doc = parse(readFileSync("/work/shared/reference/meta-openapi/business-messaging-api_v23.0.yaml", "utf8"))
const show = (p: string, m: string) => {
  const c = doc.paths[p][m].requestBody.content
  for (const [ct, v] of Object.entries<any>(c)) for (const [k, e] of Object.entries<any>(v.examples ?? {})) console.log(ct, "|", k, "|", JSON.stringify(e.value))
}
show(process.argv[2]!, process.argv[3]!)
