/** All migrations, in order. A feature adds its own file here; applied ones are never edited. */
import migration0001 from "./0001_tenancy.js"

export const migrations = {
  "0001_tenancy": migration0001
}
