import { defineConfig } from "vitest/config"

/**
 * The browser tests (`npm run test:browser`): Node runs them and drives Debian's Chromium through
 * playwright-core; each file starts its own hub (`bun src/main.ts serve`) as a child process.
 * Kept apart from `npm test`, which needs no browser.
 */
export default defineConfig({
  test: {
    root: new URL("../..", import.meta.url).pathname,
    // *.spec.ts, so that `npm test` (test/**/*.test.ts) leaves them out.
    include: ["test/browser/**/*.spec.ts"],
    testTimeout: 90_000,
    hookTimeout: 90_000,
    pool: "forks",
    // One browser and one hub at a time on the 2 cores.
    fileParallelism: false
  }
})
