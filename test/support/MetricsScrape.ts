/**
 * GET /metrics read as a test reads it: the Prometheus text exposition parsed, every line a comment
 * or a sample (or the test fails naming it), and each series read by name and labels.
 */
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import { TestHub } from "./TestHub.js"

/** One sample of the exposition: its metric name and labels. */
interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/gy

/**
 * The samples of a Prometheus text exposition (format 0.0.4): every line a comment or a sample, or
 * the test fails naming it. Small enough to read whole; the npm parsers for it are unmaintained.
 */
const parseExposition = (text: string): ReadonlyArray<Sample> =>
  text.split("\n").filter((line) => line !== "" && !line.startsWith("#")).map((line) => {
    const match = SAMPLE.exec(line)
    if (match === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    const labelText = match[2] ?? ""
    LABEL.lastIndex = 0
    while (LABEL.lastIndex < labelText.length) {
      const label = LABEL.exec(labelText)
      if (label === null) throw new Error(`bad labels in: ${line}`)
      labels[label[1] ?? ""] = label[2] ?? ""
    }
    const value = match[3] === "+Inf" ? Infinity : Number(match[3])
    if (Number.isNaN(value)) throw new Error(`bad value in: ${line}`)
    return { name: match[1] ?? "", labels, value }
  })

/** The metrics as a scrape shows them, read by name and labels (absent: 0). */
export const scrape = (token?: string) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const answer = yield* hub.request("GET", "/metrics", token === undefined ? {} : { token })
    expect(answer.status, answer.text).toBe(200)
    expect(answer.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
    const samples = parseExposition(answer.text)
    const value = (name: string, labels: Readonly<Record<string, string>> = {}) =>
      samples
        .filter((s) => s.name === name && Object.entries(labels).every(([key, wanted]) => s.labels[key] === wanted))
        .reduce((sum, s) => sum + s.value, 0)
    return { text: answer.text, samples, value }
  })
