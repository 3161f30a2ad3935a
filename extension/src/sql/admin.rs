//! The statements of the operator's functions: a queue's counts and its dead
//! letters (list, requeue, purge).

use super::{join_and, Dead, Form, Shape, EQ, GE, GT, HELD_KEYS, LT, MINUS, NOW};

impl Shape {
    /// Counts for queue_stats: ready, delayed, in_flight, oldest ready created_at.
    pub fn stats(&self) -> String {
        let t = &self.table;
        let mine = join_and(self.mine("_s_t"));
        let delayed = match &self.retry_after {
            Some(c) => format!("pg_catalog.count(*) FILTER (WHERE _s_t.{c} {GT} {NOW})"),
            None => "0::pg_catalog.int8".into(),
        };
        let ready = self.ready("_s_t");
        let in_flight = match self.form {
            Form::Lease => {
                let lu = self.locked_until.as_ref().unwrap();
                format!("pg_catalog.count(*) FILTER (WHERE _s_t.{lu} {GE} {NOW})")
            }
            Form::Advisory if self.stats_binds_held_keys() => format!(
                "pg_catalog.count(*) FILTER (WHERE {ready} AND {key} OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[]))",
                key = self.advisory_key(&format!("({})::pg_catalog.text", self.id_of("_s_t")))
            ),
            Form::Advisory => format!(
                "pg_catalog.count(*) FILTER (WHERE {ready} AND {key} IN ({HELD_KEYS}))",
                key = self.advisory_key(&format!("({})::pg_catalog.text", self.id_of("_s_t")))
            ),
            Form::RowLock => "NULL::pg_catalog.int8".into(),
        };
        let oldest = match &self.created_at {
            Some(c) => format!(
                "{NOW} OPERATOR(pg_catalog.-) pg_catalog.min(_s_t.{c}) FILTER (WHERE {ready})"
            ),
            None => "NULL::pg_catalog.interval".into(),
        };
        format!(
            "SELECT pg_catalog.count(*) FILTER (WHERE {ready}), {delayed}, {in_flight}, {oldest} FROM {t} _s_t WHERE {mine}"
        )
    }

    /// Count of dead rows.
    pub fn dead_count(&self) -> Option<String> {
        match self.dead.as_ref()? {
            Dead::Group(dl) => Some(format!(
                "SELECT pg_catalog.count(*) FROM {} _s_t WHERE _s_t.{} {EQ} {dl}",
                self.table,
                self.group.as_ref().unwrap()
            )),
            // a grouped queue's dead-letter table may hold the dead of other groups
            Dead::Table(dlt) => Some(format!(
                "SELECT pg_catalog.count(*) FROM {dlt} _s_t WHERE {}true",
                self.in_group("_s_t")
            )),
        }
    }

    /// Move dead rows back into the queue with the attempt counter reset.
    /// Params: $1 text[] ids or NULL for all. Rows: moved ids.
    pub fn requeue_dead(&self) -> Option<String> {
        let id = &self.id;
        let pick = self.ids_pick(1);
        let mut resets: Vec<(String, &str)> = Vec::new();
        if let Some(c) = &self.attempt {
            resets.push((c.clone(), "0"));
        }
        for c in [&self.retry_after, &self.locked_until, &self.processed_at]
            .into_iter()
            .flatten()
        {
            resets.push((c.clone(), "NULL"));
        }
        match self.dead.as_ref()? {
            Dead::Group(dl) => {
                let g = self.group.as_ref().unwrap();
                let mut sets = vec![format!("{g} = {}", self.group_value)];
                sets.extend(resets.iter().map(|(c, v)| format!("{c} = {v}")));
                Some(format!(
                    "UPDATE {t} _s_t SET {sets} WHERE _s_t.{g} {EQ} {dl} AND {pick} RETURNING (_s_t.{id})::pg_catalog.text",
                    t = self.table,
                    sets = sets.join(", ")
                ))
            }
            Dead::Table(dlt) => {
                let cols = self.copy_cols.join(", ");
                let vals = self
                    .copy_cols
                    .iter()
                    .map(|c| match resets.iter().find(|(r, _)| r == c) {
                        Some((_, v)) => v.to_string(),
                        None => format!("_s_m.{c}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                Some(format!(
                    "WITH _s_m AS (DELETE FROM {dlt} _s_t WHERE {grp}{pick} RETURNING _s_t.*), \
                     _s_i AS (INSERT INTO {t} ({cols}) OVERRIDING SYSTEM VALUE SELECT {vals} FROM _s_m) \
                     SELECT (_s_m.{id})::pg_catalog.text FROM _s_m",
                    t = self.table,
                    grp = self.in_group("_s_t"),
                ))
            }
        }
    }

    /// Where a queue's dead rows are (the alias `_s_t`): the table, and the
    /// condition that picks them, ending in `AND `.
    fn dead_rows_from(&self) -> Option<(String, String)> {
        Some(match self.dead.as_ref()? {
            Dead::Group(dl) => (
                self.table.clone(),
                format!("_s_t.{} {EQ} {dl} AND ", self.group.as_ref().unwrap()),
            ),
            Dead::Table(dlt) => (dlt.clone(), self.in_group("_s_t")),
        })
    }

    /// `$n` (text[] ids, or NULL for every one) as a condition on `_s_t`.
    fn ids_pick(&self, n: u8) -> String {
        format!(
            "(${n} IS NULL OR _s_t.{} {EQ} ANY ((${n}::pg_catalog.text[])::{}[]))",
            self.id, self.id_type
        )
    }

    /// Dead rows in id order, each with its attempt and the whole row as
    /// jsonb. Params: $1 int8 limit, $2 text[] ids or NULL for all.
    pub fn dead_rows(&self) -> Option<String> {
        let (t, dead) = self.dead_rows_from()?;
        let attempt = match &self.attempt {
            Some(c) => format!("(_s_t.{c})::pg_catalog.int4"),
            None => "NULL::pg_catalog.int4".into(),
        };
        Some(format!(
            "SELECT (_s_t.{id})::pg_catalog.text, {attempt}, pg_catalog.to_jsonb(_s_t.*) FROM {t} _s_t \
             WHERE {dead}{pick} ORDER BY _s_t.{id} LIMIT $1",
            id = self.id,
            pick = self.ids_pick(2),
        ))
    }

    /// Delete dead rows: those created before now − $1 (interval, NULL: any
    /// age; needs a created_at column) and among $2 (text[] ids, NULL: any).
    /// Rows: the deleted ids.
    pub fn purge_dead(&self) -> Option<String> {
        let (t, dead) = self.dead_rows_from()?;
        let age = match &self.created_at {
            Some(c) => {
                format!("($1 IS NULL OR _s_t.{c} {LT} ({NOW} {MINUS} $1::pg_catalog.interval))")
            }
            None => "$1 IS NULL".into(),
        };
        Some(format!(
            "DELETE FROM {t} _s_t WHERE {dead}{age} AND {pick} RETURNING (_s_t.{id})::pg_catalog.text",
            id = self.id,
            pick = self.ids_pick(2),
        ))
    }
}
