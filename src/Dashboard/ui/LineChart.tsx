/**
 * A small line chart of counts over time, drawn as SVG by hand (no charting library: see the README's
 * dependency list). Accessible as a whole: the picture is one image with a title and a description
 * in words (the latest values), each line has its own colour and dash pattern (never colour alone)
 * and a legend with its latest value, and every sample is in a table beside it, for screen readers
 * and for anyone who wants the numbers.
 */
import { useEffect, useId, useRef, useState } from "preact/hooks"

export interface Series {
  readonly key: string
  readonly label: string
  /** A stroke of at least 3:1 against white. */
  readonly color: string
  /** An SVG dash pattern; undefined for a solid line. */
  readonly dash?: string
}

export interface Sample {
  /** When it was read (epoch milliseconds). */
  readonly at: number
  readonly values: Readonly<Record<string, number>>
}

const PAD = { top: 12, right: 16, bottom: 28, left: 52 }

const numbers = new Intl.NumberFormat("en")
const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" })

/** A round top for the y axis (1, 2 or 5 times a power of ten) and its ticks. */
const yTicks = (max: number): ReadonlyArray<number> => {
  if (max <= 0) return [0, 1]
  const rough = max / 4
  const power = 10 ** Math.floor(Math.log10(rough))
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power
  const whole = Math.max(1, Math.ceil(step))
  const ticks: Array<number> = []
  for (let tick = 0; tick < max + whole; tick += whole) ticks.push(tick)
  return ticks
}

export const LineChart = (props: {
  readonly title: string
  readonly series: ReadonlyArray<Series>
  readonly samples: ReadonlyArray<Sample>
  /** What the table beside the chart shows, in words (a caption). */
  readonly tableCaption: string
}) => {
  const id = useId()
  // Drawn at the width it is shown at, so its text stays at its size on a phone too.
  const figure = useRef<HTMLElement>(null)
  const [shown, setShown] = useState(640)
  useEffect(() => {
    const element = figure.current
    if (element === null || typeof ResizeObserver === "undefined") return
    const observer = new ResizeObserver((entries) => {
      const width = entries[0]?.contentRect.width ?? 0
      if (width > 0) setShown(Math.round(width))
    })
    observer.observe(element)
    return () => observer.disconnect()
  }, [])
  const WIDTH = Math.max(260, shown)
  const HEIGHT = WIDTH < 500 ? 200 : 240
  const { samples, series } = props
  const latest = samples[samples.length - 1]
  const max = Math.max(0, ...samples.flatMap((s) => series.map((line) => s.values[line.key] ?? 0)))
  const ticks = yTicks(max)
  const top = ticks[ticks.length - 1] ?? 1
  const start = samples[0]?.at ?? 0
  const end = Math.max(latest?.at ?? 0, start + 1000)
  const plotWidth = WIDTH - PAD.left - PAD.right
  const plotHeight = HEIGHT - PAD.top - PAD.bottom
  const x = (at: number) => PAD.left + ((at - start) / (end - start)) * plotWidth
  const y = (value: number) => PAD.top + plotHeight - (value / top) * plotHeight
  const description = latest === undefined
    ? "No samples yet."
    : `${samples.length === 1 ? "One sample" : `${samples.length} samples`} from ${clock.format(start)} to ${
      clock.format(latest.at)
    }. Now: ${series.map((line) => `${numbers.format(latest.values[line.key] ?? 0)} ${line.label}`).join(", ")}.`
  // The table lists each change (a run of equal samples shows once), the newest first.
  const changes = samples.filter((sample, i) => {
    const before = samples[i - 1]
    return before === undefined || series.some((line) => before.values[line.key] !== sample.values[line.key])
  }).reverse()
  return (
    <figure class="chart" ref={figure}>
      <svg
        viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
        role="img"
        aria-labelledby={`${id}-title ${id}-desc`}
        class="chart-svg"
      >
        <title id={`${id}-title`}>{props.title}</title>
        <desc id={`${id}-desc`}>{description}</desc>
        {ticks.map((tick) => (
          <g key={tick}>
            <line x1={PAD.left} x2={WIDTH - PAD.right} y1={y(tick)} y2={y(tick)} class="chart-grid" />
            <text x={PAD.left - 6} y={y(tick)} class="chart-tick" text-anchor="end" dominant-baseline="middle">
              {numbers.format(tick)}
            </text>
          </g>
        ))}
        {samples.length === 0 ? null : (
          <g>
            <text x={PAD.left} y={HEIGHT - 8} class="chart-tick" text-anchor="start">{clock.format(start)}</text>
            <text x={WIDTH - PAD.right} y={HEIGHT - 8} class="chart-tick" text-anchor="end">
              {clock.format(end)}
            </text>
          </g>
        )}
        {series.map((line) => {
          const points = samples.map((s) => `${x(s.at).toFixed(1)},${y(s.values[line.key] ?? 0).toFixed(1)}`)
          return samples.length === 1
            ? (
              <circle
                key={line.key}
                cx={x(start)}
                cy={y(latest?.values[line.key] ?? 0)}
                r={3.5}
                fill={line.color}
              />
            )
            : (
              <polyline
                key={line.key}
                points={points.join(" ")}
                fill="none"
                stroke={line.color}
                stroke-width={2.5}
                stroke-dasharray={line.dash}
                stroke-linejoin="round"
              />
            )
        })}
      </svg>
      <figcaption>
        <ul class="legend">
          {series.map((line) => (
            <li key={line.key}>
              <svg width="28" height="10" aria-hidden="true" class="legend-swatch">
                <line
                  x1="1"
                  x2="27"
                  y1="5"
                  y2="5"
                  stroke={line.color}
                  stroke-width={2.5}
                  stroke-dasharray={line.dash}
                />
              </svg>
              {line.label}: <strong>{numbers.format(latest?.values[line.key] ?? 0)}</strong>
            </li>
          ))}
        </ul>
        <details class="chart-table">
          <summary>The samples as a table</summary>
          {/* Scrolls on its own: focusable, so a keyboard scrolls it too. */}
          <div class="table-wrap" tabIndex={0} role="region" aria-label={props.tableCaption}>
            <table>
              <caption class="visually-hidden">{props.tableCaption}</caption>
              <thead>
                <tr>
                  <th scope="col">Read at</th>
                  {series.map((line) => <th scope="col" key={line.key}>{line.label}</th>)}
                </tr>
              </thead>
              <tbody>
                {changes.map((sample) => (
                  <tr key={sample.at}>
                    <th scope="row">
                      <time dateTime={new Date(sample.at).toISOString()}>{clock.format(sample.at)}</time>
                    </th>
                    {series.map((line) => <td key={line.key}>{numbers.format(sample.values[line.key] ?? 0)}</td>)}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </details>
      </figcaption>
    </figure>
  )
}
