/**
 * What LineChart draws, worked out from its samples with no rendering: the size it is drawn at, the
 * y axis's ticks, where a time and a count fall, the chart's description in words and the table's rows.
 */

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

export const numbers = new Intl.NumberFormat("en")
export const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" })

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

/** The chart's frame and scales: its size, the plot's edges, the ticks, and a time's x and a count's y. */
export interface ChartScale {
  readonly width: number
  readonly height: number
  readonly left: number
  readonly right: number
  readonly ticks: ReadonlyArray<number>
  /** The first and last times on the x axis (epoch milliseconds). */
  readonly start: number
  readonly end: number
  readonly x: (at: number) => number
  readonly y: (value: number) => number
}

/** The scale of a chart shown `shown` pixels wide. */
export const chartScale = (
  samples: ReadonlyArray<Sample>,
  series: ReadonlyArray<Series>,
  shown: number
): ChartScale => {
  const width = Math.max(260, shown)
  const height = width < 500 ? 200 : 240
  const max = Math.max(0, ...samples.flatMap((s) => series.map((line) => s.values[line.key] ?? 0)))
  const ticks = yTicks(max)
  const top = ticks[ticks.length - 1] ?? 1
  const start = samples[0]?.at ?? 0
  const end = Math.max(samples[samples.length - 1]?.at ?? 0, start + 1000)
  const plotWidth = width - PAD.left - PAD.right
  const plotHeight = height - PAD.top - PAD.bottom
  return {
    width,
    height,
    left: PAD.left,
    right: width - PAD.right,
    ticks,
    start,
    end,
    x: (at) => PAD.left + ((at - start) / (end - start)) * plotWidth,
    y: (value) => PAD.top + plotHeight - (value / top) * plotHeight
  }
}

/** The chart in words: how many samples over what time, and the latest value of each line. */
export const chartDescription = (samples: ReadonlyArray<Sample>, series: ReadonlyArray<Series>) => {
  const start = samples[0]?.at ?? 0
  const latest = samples[samples.length - 1]
  return latest === undefined
    ? "No samples yet."
    : `${samples.length === 1 ? "One sample" : `${samples.length} samples`} from ${clock.format(start)} to ${
      clock.format(latest.at)
    }. Now: ${series.map((line) => `${numbers.format(latest.values[line.key] ?? 0)} ${line.label}`).join(", ")}.`
}

/** The table lists each change (a run of equal samples shows once), the newest first. */
export const changesOf = (samples: ReadonlyArray<Sample>, series: ReadonlyArray<Series>): ReadonlyArray<Sample> =>
  samples.filter((sample, i) => {
    const before = samples[i - 1]
    return before === undefined || series.some((line) => before.values[line.key] !== sample.values[line.key])
  }).reverse()
