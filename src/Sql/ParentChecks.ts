/**
 * PostgreSQL's foreign keys on the deliveries' path, checked once per statement instead of once per
 * row (migration 0034). A built-in foreign key runs a query and locks the parent row for every row
 * inserted: there (a delivery's row names its webhook and event, its attempt names the delivery, an
 * event its instance) that was 45–70 µs of PostgreSQL's CPU per delivery out of 130–157, measured
 * on the hub's own statements without the hub (scripts/bench/pg-floor.ts, docs/PERFORMANCE.md
 * "Foreign keys checked per statement"). The same guarantees, per statement:
 * - an insert locks the parents its rows name (`FOR KEY SHARE`, as the built-in check does, so a
 *   parent cannot be deleted before the insert commits) and fails if any is missing;
 * - a delete of parents fails while a child row names one of them (NO ACTION: checked after the
 *   statement, on the children committed by then);
 * - neither the child's column nor the parent's id may change (the hub changes neither).
 * Each failure is SQLSTATE 23503, `foreign_key_violation`, naming the constraint replaced, as the
 * built-in check's. SQLite keeps its built-in foreign keys: there a check is a call in the process.
 * Applied migrations run what this module writes: change it only by adding, never in place.
 */

/** A child column that names a parent row by its `id`, and the constraint it had. */
export interface ParentReference {
  readonly child: string
  readonly column: string
  readonly parent: string
}

/** The built-in constraint's name, which PostgreSQL gave it (the migrations declared it inline). */
export const constraintOf = (ref: ParentReference) => `${ref.child}_${ref.column}_fkey`

/** The statements that replace `ref`'s built-in foreign key by per-statement checks (run in one transaction). */
export const perStatementChecks = (ref: ParentReference): ReadonlyArray<string> => {
  const name = constraintOf(ref)
  const { child, column, parent } = ref
  // A statement trigger on `table` after `event`, failing as the built-in check does (SQLSTATE
  // 23503, naming the table and the constraint) when `failsWhen` holds: a function and its trigger.
  const statementCheck = (
    event: "insert" | "delete",
    table: string,
    transition: string,
    failsWhen: string,
    message: string,
    detail: string,
    declare = ""
  ) => [
    `CREATE FUNCTION ${name}_${event}() RETURNS trigger LANGUAGE plpgsql AS $$
    ${declare}
    BEGIN
      IF ${failsWhen} THEN
        RAISE EXCEPTION '${message}' USING ERRCODE = 'foreign_key_violation', TABLE = '${child}',
          CONSTRAINT = '${name}', DETAIL = '${detail}';
      END IF;
      RETURN NULL;
    END $$`,
    `CREATE TRIGGER ${name}_${event} AFTER ${event.toUpperCase()} ON ${table} REFERENCING ${transition}
      FOR EACH STATEMENT EXECUTE FUNCTION ${name}_${event}()`
  ]
  return [
    `ALTER TABLE ${child} DROP CONSTRAINT ${name}`,
    // The parents named, locked in one order (two inserts cannot deadlock on them), counted against
    // the distinct names: one missing (or deleted by a transaction that committed meanwhile) fails.
    ...statementCheck(
      "insert",
      child,
      "NEW TABLE AS inserted",
      `cardinality(named) > (SELECT count(*) FROM (SELECT 1 FROM ${parent} p WHERE p.id = ANY (named)
          ORDER BY p.id FOR KEY SHARE OF p) AS locked)`,
      `insert or update on table "${child}" violates foreign key constraint "${name}"`,
      `A ${column} names no row of "${parent}".`,
      `DECLARE named text[] := ARRAY(SELECT DISTINCT ${column} FROM inserted WHERE ${column} IS NOT NULL);`
    ),
    // Checked after the statement: children committed by another transaction meanwhile are seen
    // (each statement of the function reads a fresh snapshot), and one inserted while the delete
    // waited for its lock on the parent is there by then.
    ...statementCheck(
      "delete",
      parent,
      "OLD TABLE AS deleted",
      `EXISTS (SELECT 1 FROM ${child} c WHERE c.${column} = ANY (ARRAY(SELECT id FROM deleted)))`,
      `update or delete on table "${parent}" violates foreign key constraint "${name}" on table "${child}"`,
      `A row of "${child}" still names it.`
    ),
    // An AFTER row trigger on a column list costs nothing to an UPDATE that does not name the column
    // (a BEFORE row trigger would lock every updated row first).
    `CREATE TRIGGER ${name}_child_fixed AFTER UPDATE OF ${column} ON ${child} FOR EACH ROW
      WHEN (OLD.${column} IS DISTINCT FROM NEW.${column}) EXECUTE FUNCTION reference_fixed('${name}')`,
    `CREATE TRIGGER ${name}_parent_fixed AFTER UPDATE OF id ON ${parent} FOR EACH ROW
      WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION reference_fixed('${name}')`
  ]
}

/** The function every `_fixed` trigger runs: a change of a reference's column or its parent's id fails. */
export const REFERENCE_FIXED = `CREATE FUNCTION reference_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION 'update on table "%" would change foreign key constraint "%"', TG_TABLE_NAME, TG_ARGV[0]
      USING ERRCODE = 'foreign_key_violation', CONSTRAINT = TG_ARGV[0];
  END $$`
