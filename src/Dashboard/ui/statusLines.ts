/**
 * How each message status is drawn in a chart, the same on every page: its colour (at least 3:1
 * against white) and its dash pattern (so no line is told by colour alone).
 */
import type { MessageStatus } from "../../Domain/Vocabulary.js"

export const statusLines: Readonly<
  Record<MessageStatus | "skipped", { readonly color: string; readonly dash?: string }>
> = {
  pending: { color: "#555e69", dash: "2 4" },
  sent: { color: "#1b4a8a", dash: "8 4" },
  delivered: { color: "#0a6b4d" },
  read: { color: "#6b3fa0", dash: "14 4 3 4" },
  failed: { color: "#b3261e", dash: "4 3" },
  skipped: { color: "#8a5a00", dash: "1 3" }
}
