/**
 * The one reading of a Retry-After header (RFC 9110 10.2.3), for webhook receivers and the Graph
 * API alike: delta-seconds, or an HTTP date in any of its three forms (recipients must accept the
 * two obsolete ones too). Anything else is unreadable rather than guessed at: Date.parse would take
 * "1" or "2025" for a date.
 */

/** The longest wait a Retry-After is taken at: a day. */
const MAX_RETRY_AFTER_SECONDS = 24 * 60 * 60

const DELTA_SECONDS = /^\d+$/
const MONTHS: Readonly<Record<string, number>> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11
}
/** Sun, 06 Nov 1994 08:49:37 GMT */
const IMF_FIXDATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/
/** Sunday, 06-Nov-94 08:49:37 GMT */
const RFC850_DATE =
  /^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/
/** Sun Nov  6 08:49:37 1994 */
const ASCTIME_DATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/

/** Milliseconds since the epoch of an HTTP date's parts; undefined when a part is out of range. */
const utc = (
  year: number,
  month: string,
  day: string,
  hours: string,
  minutes: string,
  seconds: string
): number | undefined => {
  const monthIndex = MONTHS[month]
  const [d, h, m, s] = [Number(day), Number(hours), Number(minutes), Number(seconds)]
  if (monthIndex === undefined || d < 1 || d > 31 || h > 23 || m > 59 || s > 60) return undefined
  return Date.UTC(year, monthIndex, d, h, m, s)
}

/** An HTTP date as milliseconds since the epoch; undefined when `text` is not one. */
const parseHttpDate = (text: string): number | undefined => {
  const fixdate = IMF_FIXDATE.exec(text)
  if (fixdate !== null) {
    const [, day = "", month = "", year = "", h = "", m = "", s = ""] = fixdate
    return utc(Number(year), month, day, h, m, s)
  }
  const rfc850 = RFC850_DATE.exec(text)
  if (rfc850 !== null) {
    const [, day = "", month = "", year = "", h = "", m = "", s = ""] = rfc850
    // A two-digit year more than 50 years ahead is in the past century (RFC 9110 5.6.7).
    const thisYear = new Date().getUTCFullYear()
    const candidate = Math.floor(thisYear / 100) * 100 + Number(year)
    return utc(candidate > thisYear + 50 ? candidate - 100 : candidate, month, day, h, m, s)
  }
  const asctime = ASCTIME_DATE.exec(text)
  if (asctime !== null) {
    const [, month = "", day = "", h = "", m = "", s = "", year = ""] = asctime
    return utc(Number(year), month, day.trim(), h, m, s)
  }
  return undefined
}

/** Seconds a Retry-After header asks to wait, at most a day; undefined if absent or unreadable. */
export const parseRetryAfter = (header: string | null | undefined, nowMs: number): number | undefined => {
  if (header === null || header === undefined) return undefined
  const text = header.trim()
  if (text === "") return undefined
  if (DELTA_SECONDS.test(text)) return Math.min(Number(text), MAX_RETRY_AFTER_SECONDS)
  const at = parseHttpDate(text)
  if (at === undefined) return undefined
  return Math.min(Math.max(0, Math.ceil((at - nowMs) / 1000)), MAX_RETRY_AFTER_SECONDS)
}
