/**
 * What the typed client must spell out that the wire leaves to defaults: its requests are the
 * decoded side of the endpoints' schemas, where a default is already applied.
 */

/** GET /api/messages's defaults (page 1 of 50), to spread into `urlParams` beside the filters. */
export const messagesFirstPage = { page: 1, limit: 50 } as const

/** A send's defaults (`messaging_product`, `recipient_type`), to spread into a typed message. */
export const individualMessage = { messaging_product: "whatsapp", recipient_type: "individual" } as const
