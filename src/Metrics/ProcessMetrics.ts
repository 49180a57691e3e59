/** The process's own metrics (memory, CPU, event loop lag: prom-client's defaults), kept once beside every hub's. */
import { heapStats } from "bun:jsc"
import { collectDefaultMetrics, Gauge, Registry } from "prom-client"

let processRegistry: Registry | undefined

/**
 * The process's own metrics, collected once whatever the number of hubs (the event loop monitor runs for good).
 * Under Bun, prom-client's heap figures mislead: `process_heap_bytes` reads the whole data segment
 * (6 GB beside a 220 MB resident set, measured) and `nodejs_heap_size_total_bytes` less than the heap
 * in use. The first goes; the heap's sizes are read from JavaScriptCore's own statistics instead.
 */
export const processMetrics = () => {
  if (processRegistry === undefined) {
    const registry = new Registry()
    collectDefaultMetrics({ register: registry })
    for (
      const name of [
        "process_heap_bytes",
        "nodejs_heap_size_total_bytes",
        "nodejs_heap_size_used_bytes",
        "nodejs_external_memory_bytes"
      ]
    ) {
      registry.removeSingleMetric(name)
    }
    // One reading sets the three; registered first, so a scrape reads it before the other two.
    new Gauge({
      name: "nodejs_heap_size_total_bytes",
      help: "JavaScript heap capacity (JavaScriptCore), in bytes",
      registers: [registry],
      collect() {
        const heap = heapStats()
        this.set(heap.heapCapacity)
        used.set(heap.heapSize)
        external.set(heap.extraMemorySize)
      }
    })
    const used = new Gauge({
      name: "nodejs_heap_size_used_bytes",
      help: "JavaScript heap in use (JavaScriptCore), in bytes",
      registers: [registry]
    })
    const external = new Gauge({
      name: "nodejs_external_memory_bytes",
      help: "Memory outside the heap that heap objects hold (JavaScriptCore), in bytes",
      registers: [registry]
    })
    processRegistry = registry
  }
  return processRegistry
}
