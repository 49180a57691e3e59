import { type ApiResult, call } from "../api.js"
import { ago, ErrorNote, PageTitle, Resource, Time, useResource } from "../components.js"
import { Link } from "../router.js"
import { can } from "../session.js"
import type { Instance, Messages, TokenKind } from "../types.js"

const DAY_MS = 86_400_000

/** Recent activity from the message history: the newest record and the count of the last 24 hours. */
const Activity = (props: { readonly instance: Instance }) => {
  const since = new Date(Date.now() - DAY_MS).toISOString()
  const activity = useResource(
    async (): Promise<
      ApiResult<{ readonly last: string | undefined; readonly total: number; readonly today: number }>
    > => {
      const [newest, today] = await Promise.all([
        call<Messages>("GET", "/api/messages", { query: { instance_id: props.instance.id, limit: 1 } }),
        call<Messages>("GET", "/api/messages", {
          query: { instance_id: props.instance.id, limit: 1, startDate: since }
        })
      ])
      if (!newest.ok) return newest
      if (!today.ok) return today
      return {
        ok: true,
        value: { last: newest.value.data[0]?.createdAt, total: newest.value.total, today: today.value.total }
      }
    },
    props.instance.id
  )
  if (activity.loaded.state === "loading") return <span class="muted">Loading…</span>
  if (activity.loaded.state === "failed") return <ErrorNote error={activity.loaded.error} />
  const { last, total, today } = activity.loaded.value
  if (last === undefined) return <span class="muted">No messages yet</span>
  return (
    <span>
      {today} in the last 24 h · {total} in all · last <time dateTime={last} title={last}>{ago(last)}</time>{" "}
      <Link to={`/messages?instance_id=${props.instance.id}`}>history</Link>
    </span>
  )
}

export const InstancesPage = (props: { readonly kind: TokenKind }) => {
  const instances = useResource(
    () => call<{ readonly data: ReadonlyArray<Instance> }>("GET", "/api/instances"),
    "instances"
  )
  const activity = can.readMessages(props.kind)
  return (
    <main id="main">
      <PageTitle lead="The organization's business numbers. Each sends at most its send rate; activity comes from the message history.">
        Instances
      </PageTitle>
      {activity ?
        null :
        (
          <p class="note note-info">
            A session token cannot read the message history: sign in with an organization token to see activity.
          </p>
        )}
      <Resource loaded={instances.loaded} what="the instances">
        {(list) => (
          <div class="table-wrap">
            <table class="responsive">
              <caption class="visually-hidden">Instances of the organization</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Instance id</th>
                  <th scope="col">Phone number id</th>
                  <th scope="col">Business account id</th>
                  <th scope="col">Send rate</th>
                  <th scope="col">Created</th>
                  {activity ? <th scope="col">Recent activity</th> : null}
                </tr>
              </thead>
              <tbody>
                {list.data.map((instance) => (
                  <tr key={instance.id}>
                    <td data-label="Name">
                      <strong>{instance.name}</strong>
                    </td>
                    <td data-label="Instance id" class="mono">{instance.id}</td>
                    <td data-label="Phone number id" class="mono">{instance.phone_number_id}</td>
                    <td data-label="Business account id" class="mono">{instance.waba_id}</td>
                    <td data-label="Send rate">{instance.send_rate} messages/s</td>
                    <td data-label="Created">
                      <Time iso={instance.created_at} />
                    </td>
                    {activity
                      ? (
                        <td data-label="Recent activity">
                          <Activity instance={instance} />
                        </td>
                      )
                      : null}
                  </tr>
                ))}
              </tbody>
            </table>
            {list.data.length === 0
              ? (
                <p class="muted">
                  No instances: create one with <code>hub instance create</code>.
                </p>
              )
              : null}
          </div>
        )}
      </Resource>
    </main>
  )
}
