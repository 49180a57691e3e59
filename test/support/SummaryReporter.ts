/** Ends the run with the plain line CI reads: `N passed, N failed` (`, N skipped` when any). */
import type { Reporter, TestModule } from "vitest/node"

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>) {
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
        else skipped++
      }
      if (module.state() === "failed" && !module.children.size) failed++
    }
    const line = `${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`
    // Written at exit so it stays the last line, after the default reporter's summary.
    process.once("exit", () => process.stdout.write(`\n${line}\n`))
  }
}
