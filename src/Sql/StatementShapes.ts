/**
 * Statement shapes. SQLite prepares (and Bun caches, without bound) one program per distinct SQL
 * text, and a multi-row INSERT or an IN list of n items is a different text for every n. Rows are
 * therefore written in chunks whose sizes are powers of two, and IN lists are padded to a power of
 * two by repeating their last item (which changes nothing), so each statement has a handful of shapes.
 */

/** Most rows per statement: SQLite allows 32766 bound values, and 14 columns a row stay well below at this size. */
const MAX_ROWS = 256

/** The items in chunks of `max` (a power of two), then of decreasing powers of two (77 → 64, 8, 4, 1). */
export const powerOfTwoChunks = <A>(items: ReadonlyArray<A>, max = MAX_ROWS): ReadonlyArray<ReadonlyArray<A>> => {
  const chunks: Array<ReadonlyArray<A>> = []
  let at = 0
  for (let size = max; size >= 1; size = size / 2) {
    while (items.length - at >= size) {
      chunks.push(items.slice(at, at + size))
      at += size
      if (size < max) break
    }
  }
  return chunks
}

/** The list padded to a power of two with its last item (for `IN (...)`); an empty list stays empty. */
export const padded = <A>(items: ReadonlyArray<A>): ReadonlyArray<A> => {
  const last = items[items.length - 1]
  if (last === undefined) return items
  let size = 1
  while (size < items.length) size *= 2
  return size === items.length ? items : [...items, ...Array.from({ length: size - items.length }, () => last)]
}
