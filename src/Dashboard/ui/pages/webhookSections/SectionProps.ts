import type { Webhook } from "../../types.js"

/** What each section of a webhook's page is given (src/Dashboard/ui/pages/Webhook.tsx lists the sections). */
export interface SectionProps {
  readonly webhook: Webhook
  /** The record an action answered. */
  readonly onChanged: (webhook: Webhook) => void
  /** An action queued deliveries: read the record (its health) and the delivery log again. */
  readonly onQueued: () => void
  /** Bumped by onQueued. */
  readonly refresh: number
}
