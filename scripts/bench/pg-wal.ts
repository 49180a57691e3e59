/**
 * What a benchmark phase cost PostgreSQL's write-ahead log (issue 34, point 2): WAL bytes, records
 * and full-page images, the WAL's writes and fsyncs, commits and checkpoints, read before and after
 * the phase and divided by its work. PostgreSQL 18 keeps the WAL's writes and fsyncs in
 * `pg_stat_io` (object `wal`, every process: backends that flush at commit, the WAL writer); its
 * `pg_stat_wal` has the rest. Bytes come from the WAL position itself (`pg_current_wal_lsn()`), exact
 * whenever read; the counters are flushed by each backend at most once a second and by an idle one
 * within a second, hence the wait before each reading. Differences of two readings, so nothing is
 * reset and `--pg-statements` (which resets the database's counters after its report) can run too.
 */

interface WalReading {
  readonly bytes: number
  readonly records: number
  readonly fullPageImages: number
  readonly buffersFull: number
  readonly writes: number
  readonly fsyncs: number
  readonly commits: number
  readonly checkpoints: number
}

/** The WAL's counters now (server-wide, but commits of the database `url` only), after the stats settle. */
export const walReading = async (url: string): Promise<WalReading> => {
  await Bun.sleep(1100)
  const db = new Bun.SQL(url)
  try {
    const [row]: Array<Record<string, string>> = await db.unsafe(
      `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS bytes,
              w.wal_records::text AS records, w.wal_fpi::text AS fpi, w.wal_buffers_full::text AS full,
              (SELECT sum(writes)::text FROM pg_stat_io WHERE object = 'wal') AS writes,
              (SELECT sum(fsyncs)::text FROM pg_stat_io WHERE object = 'wal') AS fsyncs,
              (SELECT xact_commit::text FROM pg_stat_database WHERE datname = current_database()) AS commits,
              (SELECT (num_timed + num_requested)::text FROM pg_stat_checkpointer) AS checkpoints
         FROM pg_stat_wal w`
    )
    const n = (key: string) => Number(row?.[key] ?? Number.NaN)
    return {
      bytes: n("bytes"),
      records: n("records"),
      fullPageImages: n("fpi"),
      buffersFull: n("full"),
      writes: n("writes"),
      fsyncs: n("fsyncs"),
      commits: n("commits"),
      checkpoints: n("checkpoints")
    }
  } finally {
    await db.close()
  }
}

/** The WAL's cost per unit of work (delivery or send) since `before`, with the phase's totals. */
export const walSince = async (url: string, before: WalReading, units: number) => {
  const after = await walReading(url)
  const per = (key: keyof WalReading) => (after[key] - before[key]) / Math.max(1, units)
  return {
    units,
    bytesPerUnit: per("bytes"),
    recordsPerUnit: per("records"),
    fullPageImagesPerUnit: per("fullPageImages"),
    writesPerUnit: per("writes"),
    fsyncsPerUnit: per("fsyncs"),
    commitsPerUnit: per("commits"),
    /** WAL buffers that filled before a commit flushed them, and checkpoints begun, in the phase (not per unit). */
    buffersFull: after.buffersFull - before.buffersFull,
    checkpoints: after.checkpoints - before.checkpoints
  }
}

export type WalCost = Awaited<ReturnType<typeof walSince>>
