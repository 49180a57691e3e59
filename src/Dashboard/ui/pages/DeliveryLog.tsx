/**
 * A webhook's delivery log, on its page (GET /api/webhooks/:id/deliveries): newest first with every
 * attempt, paged by the answers' cursors; a finished delivery can be sent again.
 */
import { useEffect, useState } from "preact/hooks"
import { deliveryStatuses } from "../../../Domain/Vocabulary.js"
import { call, pathWith } from "../api.js"
import { ErrorNote, Outcome, Pager, Resource, usePolling, useResource } from "../components.js"
import { useLiveFeed } from "../live.js"
import { FIRST_PAGE, type PagePlace, pageQuery } from "../paging.js"
import { Link } from "../router.js"
import type { Deliveries, Webhook } from "../types.js"
import { DELIVERY_PAGE_SIZE, DELIVERY_POLL_MS, DeliveryTable, isQueued, useRetry } from "./DeliveryTable.js"

/** The delivery log of a webhook: every delivery with its attempts; one can be sent again. `refresh` changes when the page's actions queue one. */
export const DeliveryLog = (props: { readonly webhook: Webhook; readonly refresh: number }) => {
  const [status, setStatus] = useState("")
  const [place, setPlace] = useState<PagePlace>(FIRST_PAGE)
  const query = { ...pageQuery(place), limit: DELIVERY_PAGE_SIZE, status }
  const deliveries = useResource(
    () => call<Deliveries>("GET", `/api/webhooks/${props.webhook.id}/deliveries`, { query }),
    `${props.webhook.id} ${JSON.stringify(query)}`
  )
  const { entries } = useLiveFeed()
  const newest = entries[0]

  // A new event for the webhook's instance may have queued a delivery, and the page's own actions (test, recover) have: show them.
  useEffect(() => {
    if (newest?.kind === "event" && newest.event.instanceId === props.webhook.instance_id) void deliveries.reload()
  }, [newest])
  useEffect(() => {
    if (props.refresh > 0) void deliveries.reload()
  }, [props.refresh])

  // Queued deliveries change on their own (attempts, retries): look again until none is.
  const queued = deliveries.loaded.state === "ready" && deliveries.loaded.value.data.some(isQueued)
  usePolling(queued, deliveries.reload, DELIVERY_POLL_MS, deliveries.loaded)

  const { error, outcome, retry } = useRetry(deliveries.reload)

  return (
    <div class="stack">
      <div class="toolbar">
        <div class="field inline">
          <label for="delivery-status">Status</label>
          <select
            id="delivery-status"
            value={status}
            onChange={(e) => {
              setStatus(e.currentTarget.value)
              setPlace(FIRST_PAGE)
            }}
          >
            <option value="">Any</option>
            {deliveryStatuses.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div class="actions-row">
          <Link to={pathWith("/deliveries", { webhook_id: props.webhook.id })}>Search with more filters</Link>
          <button type="button" class="secondary" onClick={() => void deliveries.reload()}>Refresh</button>
        </div>
      </div>
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Not sent again:" />
      <Resource loaded={deliveries.loaded} what="the deliveries">
        {(list) => (
          <>
            <DeliveryTable
              caption={`Deliveries to ${props.webhook.name}`}
              deliveries={list.data}
              toActive={() => props.webhook.active}
              onRetry={(delivery) => void retry(delivery)}
              empty={`No deliveries${status === "" ? " yet" : ` with status ${status}`}${
                place.position > 1 ? " on this page" : ""
              }.`}
            />
            <Pager place={place} list={list} noun={["delivery", "deliveries"]} onPage={setPlace} />
          </>
        )}
      </Resource>
    </div>
  )
}
