/** The pieces LineChart draws: its axes and lines inside the SVG, and the legend and table beside it. */
import { changesOf, type ChartScale, clock, numbers, type Sample, type Series } from "./lineChartModel.js"

/** A grid line and its count at each tick of the y axis. */
export const CountAxis = (props: { readonly scale: ChartScale }) => {
  const { left, right, ticks, y } = props.scale
  return (
    <>
      {ticks.map((tick) => (
        <g key={tick}>
          <line x1={left} x2={right} y1={y(tick)} y2={y(tick)} class="chart-grid" />
          <text x={left - 6} y={y(tick)} class="chart-tick" text-anchor="end" dominant-baseline="middle">
            {numbers.format(tick)}
          </text>
        </g>
      ))}
    </>
  )
}

/** The first and last times under the plot; nothing before the first sample. */
export const TimeAxis = (props: { readonly scale: ChartScale; readonly samples: ReadonlyArray<Sample> }) => {
  const { left, right, height, start, end } = props.scale
  return props.samples.length === 0 ? null : (
    <g>
      <text x={left} y={height - 8} class="chart-tick" text-anchor="start">{clock.format(start)}</text>
      <text x={right} y={height - 8} class="chart-tick" text-anchor="end">
        {clock.format(end)}
      </text>
    </g>
  )
}

/** Each series as a line through its samples, or a dot while there is only one. */
export const SeriesLines = (props: {
  readonly scale: ChartScale
  readonly series: ReadonlyArray<Series>
  readonly samples: ReadonlyArray<Sample>
}) => {
  const { scale: { x, y, start }, samples } = props
  const latest = samples[samples.length - 1]
  return (
    <>
      {props.series.map((line) => {
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
    </>
  )
}

/** Each line's swatch (its colour and dash), its label and its latest value. */
export const ChartLegend = (props: { readonly series: ReadonlyArray<Series>; readonly latest: Sample | undefined }) => (
  <ul class="legend">
    {props.series.map((line) => (
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
        {line.label}: <strong>{numbers.format(props.latest?.values[line.key] ?? 0)}</strong>
      </li>
    ))}
  </ul>
)

/** Every change of the samples as a table, folded away under a summary. */
export const SampleTable = (props: {
  readonly series: ReadonlyArray<Series>
  readonly samples: ReadonlyArray<Sample>
  readonly caption: string
  readonly timeHeading: string
}) => {
  const { series } = props
  return (
    <details class="chart-table">
      <summary>The samples as a table</summary>
      {/* Scrolls on its own: focusable, so a keyboard scrolls it too. */}
      <div class="table-wrap" tabIndex={0} role="region" aria-label={props.caption}>
        <table>
          <caption class="visually-hidden">{props.caption}</caption>
          <thead>
            <tr>
              <th scope="col">{props.timeHeading}</th>
              {series.map((line) => <th scope="col" key={line.key}>{line.label}</th>)}
            </tr>
          </thead>
          <tbody>
            {changesOf(props.samples, series).map((sample) => (
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
  )
}
