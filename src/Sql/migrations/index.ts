/** All migrations, in order. A feature adds its own file here; applied ones are never edited. */
import migration0001 from "./0001_tenancy.js"
import migration0002 from "./0002_messages.js"
import migration0003 from "./0003_events.js"
import migration0004 from "./0004_message_indexes.js"
import migration0005 from "./0005_delivery_webhook_due.js"
import migration0006 from "./0006_revocation_feed.js"
import migration0007 from "./0007_calls.js"
import migration0008 from "./0008_message_status_indexes.js"
import migration0009 from "./0009_webhook_operations.js"
import migration0010 from "./0010_fleet.js"
import migration0011 from "./0011_message_status_partial.js"
import migration0012 from "./0012_webhook_tests.js"
import migration0013 from "./0013_message_status_times.js"
import migration0014 from "./0014_stale_changes.js"
import migration0015 from "./0015_idempotency_per_instance.js"
import migration0016 from "./0016_user_identities.js"
import migration0017 from "./0017_people.js"
import migration0018 from "./0018_marketing_messages.js"
import migration0019 from "./0019_send_queue.js"
import migration0020 from "./0020_broadcasts.js"
import migration0021 from "./0021_send_queue_due.js"
import migration0022 from "./0022_queue_depth_samples.js"
import migration0024 from "./0024_replay_and_poll.js"
import migration0025 from "./0025_contact_order.js"
import migration0026 from "./0026_unknown_outcomes.js"
import migration0027 from "./0027_event_traceparent.js"
import migration0028 from "./0028_queue_send_seconds.js"
import migration0029 from "./0029_deliveries_hot.js"
import migration0030 from "./0030_send_pacing_unlogged.js"
import migration0031 from "./0031_send_queue_lanes.js"
import migration0032 from "./0032_deliveries_free.js"
import migration0033 from "./0033_deliveries_message_id.js"
import migration0034 from "./0034_parent_checks.js"
import migration0035 from "./0035_deliveries_event.js"
import migration0036 from "./0036_early_statuses_at.js"

export const migrations = {
  "0001_tenancy": migration0001,
  "0002_messages": migration0002,
  "0003_events": migration0003,
  "0004_message_indexes": migration0004,
  "0005_delivery_webhook_due": migration0005,
  "0006_revocation_feed": migration0006,
  "0007_calls": migration0007,
  "0008_message_status_indexes": migration0008,
  "0009_webhook_operations": migration0009,
  "0010_fleet": migration0010,
  "0011_message_status_partial": migration0011,
  "0012_webhook_tests": migration0012,
  "0013_message_status_times": migration0013,
  "0014_stale_changes": migration0014,
  "0015_idempotency_per_instance": migration0015,
  "0016_user_identities": migration0016,
  "0017_people": migration0017,
  "0018_marketing_messages": migration0018,
  "0019_send_queue": migration0019,
  "0020_broadcasts": migration0020,
  "0021_send_queue_due": migration0021,
  "0022_queue_depth_samples": migration0022,
  "0024_replay_and_poll": migration0024,
  "0025_contact_order": migration0025,
  "0026_unknown_outcomes": migration0026,
  "0027_event_traceparent": migration0027,
  "0028_queue_send_seconds": migration0028,
  "0029_deliveries_hot": migration0029,
  "0030_send_pacing_unlogged": migration0030,
  "0031_send_queue_lanes": migration0031,
  "0032_deliveries_free": migration0032,
  "0033_deliveries_message_id": migration0033,
  "0034_parent_checks": migration0034,
  "0035_deliveries_event": migration0035,
  "0036_early_statuses_at": migration0036
}
