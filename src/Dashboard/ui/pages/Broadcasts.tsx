/**
 * Broadcasts: the send queue of each number (refreshed while the page is open), a form that creates a
 * broadcast of an approved template to the people of a CSV (each with their own body parameters),
 * and the list of broadcasts with their counts. The queues and the form are in broadcasts/.
 */
import { call } from "../api.js"
import { Badge, PageTitle, Resource, Time, usePolling, useResource } from "../components.js"
import { useInstanceChoices } from "../instances.js"
import { Link } from "../router.js"
import type { Broadcast, Broadcasts, TokenKind } from "../types.js"
import { broadcastTone, numbers } from "./broadcasts/display.js"
import { NewBroadcastForm } from "./broadcasts/NewBroadcastForm.js"
import { SendQueuesSection } from "./broadcasts/SendQueues.js"

const POLL_MS = 5_000

/** One line of counts: "12 sent · 3 delivered · 1 failed". */
const countsSummary = (counts: Broadcast["counts"]) => {
  const parts = (["pending", "sent", "delivered", "read", "failed", "skipped"] as const)
    .filter((key) => counts[key] > 0)
    .map((key) => `${numbers.format(counts[key])} ${key}`)
  return parts.length === 0 ? "—" : parts.join(" · ")
}

const BroadcastList = (props: { readonly list: Broadcasts }) => (
  <div class="table-wrap">
    <table class="responsive">
      <caption class="visually-hidden">Broadcasts, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Status</th>
          <th scope="col">Template</th>
          <th scope="col">Recipients</th>
          <th scope="col">Progress</th>
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {props.list.data.map((b) => (
          <tr key={b.id}>
            <td data-label="Name">
              <Link to={`/broadcasts/${encodeURIComponent(b.id)}`}>{b.name}</Link>
            </td>
            <td data-label="Status">
              <Badge tone={broadcastTone(b.status)}>{b.status}</Badge>
              {b.status === "scheduled" && b.send_at !== null
                ? (
                  <span class="small muted">
                    {" "}for <Time iso={b.send_at} />
                  </span>
                )
                : null}
            </td>
            <td data-label="Template" class="mono">{b.template.name} ({b.template.language.code})</td>
            <td data-label="Recipients">{numbers.format(b.counts.recipients)}</td>
            <td data-label="Progress">{countsSummary(b.counts)}</td>
            <td data-label="Created">
              <Time iso={b.created_at} />
            </td>
          </tr>
        ))}
      </tbody>
    </table>
    {props.list.data.length === 0 ? <p class="muted">No broadcasts yet.</p> : null}
  </div>
)

export const BroadcastsPage = (props: { readonly kind: TokenKind }) => {
  const instances = useInstanceChoices(props.kind)
  const broadcasts = useResource(() => call<Broadcasts>("GET", "/api/broadcasts?limit=100"), "broadcasts")
  usePolling(true, broadcasts.reload, POLL_MS, broadcasts.loaded)
  return (
    <main id="main">
      <PageTitle lead="One approved template to many people, each with their own parameters, paced to each number's limits.">
        Broadcasts
      </PageTitle>
      <SendQueuesSection instances={instances} pollMs={POLL_MS} />
      <section aria-labelledby="list-title">
        <div class="toolbar">
          <h2 id="list-title">Recent broadcasts</h2>
          <button type="button" class="secondary" onClick={() => void broadcasts.reload()}>Refresh</button>
        </div>
        <Resource loaded={broadcasts.loaded} what="the broadcasts">
          {(list) => <BroadcastList list={list} />}
        </Resource>
      </section>
      <section>
        <NewBroadcastForm kind={props.kind} instances={instances} onCreated={() => void broadcasts.reload()} />
      </section>
    </main>
  )
}
