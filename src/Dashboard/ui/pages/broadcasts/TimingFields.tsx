/** When a broadcast goes out (now, or at a local date and time) and how long each send may wait. */
import { localZone } from "../../components.js"

export type When = "now" | "later"

export const TimingFields = (props: {
  readonly when: When
  readonly onWhen: (when: When) => void
  readonly sendAt: string
  readonly onSendAt: (sendAt: string) => void
  readonly validity: string
  readonly onValidity: (validity: string) => void
}) => (
  <>
    <fieldset>
      <legend>When</legend>
      <div class="choices">
        <div class="check">
          <input
            id="b-now"
            type="radio"
            name="b-when"
            checked={props.when === "now"}
            onChange={() => props.onWhen("now")}
          />
          <label for="b-now">Now</label>
        </div>
        <div class="check">
          <input
            id="b-later"
            type="radio"
            name="b-when"
            checked={props.when === "later"}
            onChange={() => props.onWhen("later")}
          />
          <label for="b-later">At a time (up to 35 days ahead)</label>
        </div>
      </div>
    </fieldset>
    <div class="row">
      {props.when === "later"
        ? (
          <div class="field">
            <label for="b-send-at">Send at ({localZone()})</label>
            <input
              id="b-send-at"
              type="datetime-local"
              required
              value={props.sendAt}
              onInput={(e) => props.onSendAt(e.currentTarget.value)}
            />
          </div>
        )
        : null}
      <div class="field">
        <label for="b-validity">Validity (seconds, optional)</label>
        <input
          id="b-validity"
          type="number"
          min={1}
          max={36000}
          step={1}
          aria-describedby="b-validity-help"
          value={props.validity}
          onInput={(e) => props.onValidity(e.currentTarget.value)}
        />
        <p id="b-validity-help" class="help">
          How long each send may wait for its turn; the hub's default when empty.
        </p>
      </div>
    </div>
  </>
)
