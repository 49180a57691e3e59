/** Each number's send queue, as a table read again while the page is open. */
import { call } from "../../api.js"
import { Resource, usePolling, useResource } from "../../components.js"
import type { Instance, SendQueues } from "../../types.js"
import { duration, numbers } from "./display.js"

const numberName = (instances: ReadonlyArray<Instance> | undefined, instanceId: string, phoneNumberId: string) => {
  const instance = instances?.find((i) => i.id === instanceId)
  return instance === undefined ? phoneNumberId : `${instance.name} (${phoneNumberId})`
}

/** Each number's queue: what waits, since when, at what pace, and the pace it keeps now. Read again every `pollMs`. */
export const SendQueuesSection = (props: {
  readonly instances: ReadonlyArray<Instance> | undefined
  readonly pollMs: number
}) => {
  const queues = useResource(() => call<SendQueues>("GET", "/api/send-queues"), "send-queues")
  usePolling(true, queues.reload, props.pollMs, queues.loaded)
  return (
    <section aria-labelledby="queues-title">
      <h2 id="queues-title">Send queues</h2>
      <p class="help">
        Queued sends and broadcasts wait here, each number at its own pace; read again every {props.pollMs / 1000}{" "}
        seconds while this page is open.
      </p>
      <Resource loaded={queues.loaded} what="the send queues">
        {(list) => (
          <div class="table-wrap">
            <table class="responsive">
              <caption class="visually-hidden">Send queues by number</caption>
              <thead>
                <tr>
                  <th scope="col">Number</th>
                  <th scope="col">Queued</th>
                  <th scope="col">Oldest wait</th>
                  <th scope="col">Pace</th>
                  <th scope="col">Sending now</th>
                  <th scope="col">Empty in about</th>
                </tr>
              </thead>
              <tbody>
                {list.data.map((queue) => (
                  <tr key={queue.phone_number_id}>
                    <td data-label="Number" class="mono">
                      {numberName(props.instances, queue.instance_id, queue.phone_number_id)}
                    </td>
                    <td data-label="Queued">{numbers.format(queue.depth)}</td>
                    <td data-label="Oldest wait">
                      {queue.oldest_wait_seconds === 0 ? "none waits" : duration(queue.oldest_wait_seconds)}
                    </td>
                    <td data-label="Pace">{numbers.format(queue.send_rate)} messages/s</td>
                    <td data-label="Sending now">{numbers.format(queue.sends_per_second)} messages/s</td>
                    <td data-label="Empty in about">
                      {queue.depth === 0 || queue.send_rate <= 0 ? "—" : duration(queue.depth / queue.send_rate)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            {list.data.length === 0 ? <p class="muted">No numbers.</p> : null}
          </div>
        )}
      </Resource>
    </section>
  )
}
