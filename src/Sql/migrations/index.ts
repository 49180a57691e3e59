/** All migrations, in order. A feature adds its own file here; applied ones are never edited. */
import migration0001 from "./0001_tenancy.js"
import migration0002 from "./0002_messages.js"
import migration0003 from "./0003_events.js"
import migration0004 from "./0004_message_indexes.js"
import migration0005 from "./0005_delivery_webhook_due.js"
import migration0010 from "./0010_fleet.js"

export const migrations = {
  "0001_tenancy": migration0001,
  "0002_messages": migration0002,
  "0003_events": migration0003,
  "0004_message_indexes": migration0004,
  "0005_delivery_webhook_due": migration0005,
  "0010_fleet": migration0010
}
