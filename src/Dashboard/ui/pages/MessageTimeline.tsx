/**
 * A message's status timeline: the steps it made (pending, sent, delivered, read, or failed), each
 * with its time as the record keeps it or as the live feed saw it.
 */
import { useEffect, useRef } from "preact/hooks"
import { Time } from "../components.js"
import { type SeenStatus, seenStatuses, useLiveFeed } from "../live.js"
import type { Message } from "../types.js"

interface Step {
  readonly status: string
  readonly reached: boolean
  readonly detail: string
  readonly at: string | undefined
}

/** A message's steps: each step's time as the record keeps it (`statusTimes`), and status events seen live since. */
const timelineOf = (message: Message, seen: ReadonlyArray<SeenStatus>): ReadonlyArray<Step> => {
  if (message.direction === "inbound") {
    return [{
      status: "received",
      reached: true,
      detail: "Received from the customer and recorded",
      at: message.createdAt
    }]
  }
  // A failed send shows the steps it is known to have made before failing (a refused one: none).
  const failedAfter = (["sent", "delivered"] as const).filter((status) => message.statusTimes[status] !== undefined)
  const path = message.status === "failed"
    ? [...failedAfter, "failed" as const]
    : (["sent", "delivered", "read"] as const)
  const reachedUpTo = path.findIndex((status) => status === message.status)
  const pending: Step = {
    status: "pending",
    reached: true,
    detail: "Accepted by the hub and sent upstream",
    at: message.createdAt
  }
  return [
    pending,
    ...path.map((status, index): Step => {
      const recorded = message.statusTimes[status]
      const event = seen.find((s) => s.status === status)
      const reached = index <= reachedUpTo || recorded !== undefined || event !== undefined
      return {
        status,
        reached,
        at: recorded ?? event?.at ?? event?.receivedAt,
        detail: recorded !== undefined
          ? "Status event recorded"
          : event !== undefined
          ? "Status event seen on the live feed"
          : reached
          ? "Reached (the upstream sent no event for this step, or sent it after a later one)"
          : "Not reached yet"
      }
    })
  ]
}

export const Timeline = (props: { readonly message: Message; readonly onClose: () => void }) => {
  const { entries } = useLiveFeed()
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [props.message.id])
  const steps = timelineOf(
    props.message,
    props.message.waMessageId === null ? [] : seenStatuses(entries, props.message.waMessageId)
  )
  return (
    <section class="card timeline" aria-labelledby="timeline-title">
      <div class="card-head">
        <h2 id="timeline-title" tabIndex={-1} ref={heading}>Status timeline</h2>
        <button type="button" class="secondary" onClick={props.onClose}>Close</button>
      </div>
      <p class="mono small">{props.message.waMessageId ?? props.message.id}</p>
      <ol class="steps">
        {steps.map((step) => (
          <li key={step.status} class={step.reached ? "step reached" : "step"}>
            <span class="step-dot" aria-hidden="true" />
            <div>
              <strong>{step.status}</strong>{" "}
              {step.reached ? <span class="visually-hidden">(reached)</span> : <span class="muted">(not yet)</span>}
              <div class="muted small">
                {step.detail}
                {step.at === undefined ? null : (
                  <>
                    {" "}· <Time iso={step.at} />
                  </>
                )}
              </div>
            </div>
          </li>
        ))}
      </ol>
      <p class="help">
        Each step's time is the one its upstream status event carries. The upstream may skip a step (a read receipt
        without a delivered one) or send it after a later one: such a step shows as reached, without a time.
      </p>
    </section>
  )
}
