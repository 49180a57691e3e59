/** A time window's fields (its start, its optional end) in the viewer's time zone, and the note saying so. */
import { localZone } from "../../components.js"

export const TimeWindowFields = (props: {
  /** Prefix of the fields' ids: `<id>-since`, `<id>-until`, `<id>-zone`. */
  readonly id: string
  readonly what: string
  readonly since: string
  readonly until: string
  readonly onSince: (value: string) => void
  readonly onUntil: (value: string) => void
  /** Said after the time zone note. */
  readonly note?: string
}) => {
  const { id } = props
  return (
    <>
      <div class="row">
        <div class="field">
          <label for={`${id}-since`}>{props.what} from</label>
          <input
            id={`${id}-since`}
            type="datetime-local"
            required
            value={props.since}
            onInput={(e) => props.onSince(e.currentTarget.value)}
            aria-describedby={`${id}-zone`}
          />
        </div>
        <div class="field">
          <label for={`${id}-until`}>{props.what} before (optional)</label>
          <input
            id={`${id}-until`}
            type="datetime-local"
            value={props.until}
            onInput={(e) => props.onUntil(e.currentTarget.value)}
            aria-describedby={`${id}-zone`}
          />
        </div>
      </div>
      <p id={`${id}-zone`} class="help">
        Times are in your time zone ({localZone()}); without an end, the window ends now.{props.note ?? ""}
      </p>
    </>
  )
}
