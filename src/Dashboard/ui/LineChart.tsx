/**
 * A small line chart of counts over time, drawn as SVG by hand (no charting library: see the README's
 * dependency list). Accessible as a whole: the picture is one image with a title and a description
 * in words (the latest values), each line has its own colour and dash pattern (never colour alone)
 * and a legend with its latest value, and every sample is in a table beside it, for screen readers
 * and for anyone who wants the numbers.
 */
import { useEffect, useId, useRef, useState } from "preact/hooks"
import { chartDescription, chartScale, type Sample, type Series } from "./lineChartModel.js"
import { ChartLegend, CountAxis, SampleTable, SeriesLines, TimeAxis } from "./LineChartParts.js"

/** Drawn at the width it is shown at, so its text stays at its size on a phone too. */
const useShownWidth = () => {
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
  return { figure, shown }
}

export const LineChart = (props: {
  readonly title: string
  readonly series: ReadonlyArray<Series>
  readonly samples: ReadonlyArray<Sample>
  /** What the table beside the chart shows, in words (a caption). */
  readonly tableCaption: string
  /** The heading of the table's time column (default "Read at"). */
  readonly timeHeading?: string
}) => {
  const id = useId()
  const { figure, shown } = useShownWidth()
  const { samples, series } = props
  const scale = chartScale(samples, series, shown)
  return (
    <figure class="chart" ref={figure}>
      <svg
        viewBox={`0 0 ${scale.width} ${scale.height}`}
        role="img"
        aria-labelledby={`${id}-title ${id}-desc`}
        class="chart-svg"
      >
        <title id={`${id}-title`}>{props.title}</title>
        <desc id={`${id}-desc`}>{chartDescription(samples, series)}</desc>
        <CountAxis scale={scale} />
        <TimeAxis scale={scale} samples={samples} />
        <SeriesLines scale={scale} series={series} samples={samples} />
      </svg>
      <figcaption>
        <ChartLegend series={series} latest={samples[samples.length - 1]} />
        <SampleTable
          series={series}
          samples={samples}
          caption={props.tableCaption}
          timeHeading={props.timeHeading ?? "Read at"}
        />
      </figcaption>
    </figure>
  )
}
