//! The statements that move a queue's rows into its dead letter: the CTEs a
//! settle or a claim ends with, and the two routed statements of a
//! distributed table.

use super::*;

impl Shape {
    /// CTEs moving the rows of `src` (a CTE with `_s_id`, `_s_dead`) flagged dead
    /// into the dead letter. They end in a CTE `_s_d(_s_id)` of the moved ids.
    /// The moved row carries the number of deliveries it had: row_lock counts
    /// this one as it moves it, the others counted it at claim.
    pub(super) fn dead_ctes(&self, src: &str) -> Vec<String> {
        self.dead_ctes_counted(src, self.settle_count())
    }

    /// How a settle's move into the dead letter counts the delivery it settles.
    fn settle_count(&self) -> Count {
        match self.form {
            Form::RowLock => Count::Add,
            _ => Count::Keep,
        }
    }

    pub(super) fn dead_ctes_counted(&self, src: &str, count: Count) -> Vec<String> {
        let Some(dead) = &self.dead else {
            return vec![];
        };
        let id = &self.id;
        let mut sets = Vec::new();
        let lease_clear = self.locked_until.as_ref().map(|c| format!("{c} = NULL"));
        match dead {
            Dead::Group(dl) => {
                sets.push(format!(
                    "{} = {dl}",
                    self.group.as_ref().expect("group dead letter needs group")
                ));
                sets.extend(lease_clear);
                match (count, &self.attempt) {
                    (Count::Add, _) => sets.extend(self.attempt_plus_one("_s_t")),
                    (Count::Undo, Some(c)) => sets.push(format!("{c} = _s_t.{c} {MINUS} 1")),
                    _ => {}
                }
                vec![format!(
                    "_s_d AS (UPDATE {t} _s_t SET {sets} WHERE {grp}_s_t.{id} {EQ} ANY (ARRAY(SELECT {src}._s_id FROM {src} WHERE {src}._s_dead)) RETURNING _s_t.{id} AS _s_id)",
                    t = self.table,
                    grp = self.in_group("_s_t"),
                    sets = sets.join(", ")
                )]
            }
            Dead::Table(dlt) => {
                let (cols, vals) = self.dead_values("_s_dm", count);
                vec![
                    format!(
                        "_s_dm AS (DELETE FROM {t} _s_t WHERE {grp}_s_t.{id} {EQ} ANY (ARRAY(SELECT {src}._s_id FROM {src} WHERE {src}._s_dead)) RETURNING _s_t.*)",
                        t = self.table,
                        grp = self.in_group("_s_t"),
                    ),
                    format!("_s_di AS (INSERT INTO {dlt} ({cols}) OVERRIDING SYSTEM VALUE SELECT {vals} FROM _s_dm)"),
                    format!("_s_d AS (SELECT _s_dm.{id} AS _s_id FROM _s_dm)"),
                ]
            }
        }
    }

    /// The columns a move into the dead-letter table writes, and their values
    /// from the moved row `a`: the lease cleared, the attempt counter as
    /// `count` says.
    fn dead_values(&self, a: &str, count: Count) -> (String, String) {
        let vals = self
            .copy_cols
            .iter()
            .map(|c| {
                if Some(c) == self.locked_until.as_ref() {
                    "NULL".to_string()
                } else if Some(c) == self.attempt.as_ref() && count == Count::Add {
                    format!("COALESCE({a}.{c}, 0) {PLUS} 1")
                } else if Some(c) == self.attempt.as_ref() && count == Count::Undo {
                    format!("{a}.{c} {MINUS} 1")
                } else {
                    format!("{a}.{c}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        (self.copy_cols.join(", "), vals)
    }

    /// A distributed table with a dead-letter table moves dead rows with two
    /// statements of their own ([`dead_copy`](Self::dead_copy), then
    /// [`dead_delete`](Self::dead_delete)), each routed to the group's shard:
    /// Citus runs a statement with an INSERT in a CTE through the coordinator.
    /// The settle statement then only flags the rows (`to_dead`).
    pub fn moves_dead_apart(&self) -> bool {
        self.distributed && matches!(self.dead, Some(Dead::Table(_)))
    }

    /// Copy the rows `$1` (text[] ids, held by the caller) into the dead-letter
    /// table, counted as a settle counts them, or with `taken` as a claim's take
    /// left them (see [`move_taken_dead`](Self::move_taken_dead)).
    pub fn dead_copy(&self, taken: bool) -> Option<String> {
        let Some(Dead::Table(dlt)) = &self.dead else {
            return None;
        };
        let count = if taken {
            Count::Undo
        } else {
            self.settle_count()
        };
        let (cols, vals) = self.dead_values("_s_dm", count);
        Some(format!(
            "INSERT INTO {dlt} ({cols}) OVERRIDING SYSTEM VALUE SELECT {vals} FROM {t} _s_dm WHERE {grp}_s_dm.{id} {EQ} ANY (($1::pg_catalog.text[])::{ty}[])",
            t = self.table,
            grp = self.in_group("_s_dm"),
            id = self.id,
            ty = self.id_type,
        ))
    }

    /// Delete the rows `$1` (text[] ids) that [`dead_copy`](Self::dead_copy)
    /// copied. Rows: the ids deleted.
    pub fn dead_delete(&self) -> String {
        format!(
            "DELETE FROM {t} _s_t WHERE {grp}_s_t.{id} {EQ} ANY (($1::pg_catalog.text[])::{ty}[]) RETURNING (_s_t.{id})::pg_catalog.text",
            t = self.table,
            grp = self.in_group("_s_t"),
            id = self.id,
            ty = self.id_type,
        )
    }

    pub(super) fn dead_flag(&self, att_expr: &str) -> String {
        match (self.max_attempts, &self.dead) {
            (Some(max), Some(_)) => format!("({} {GE} {max})", self.delivery_attempt(att_expr)),
            _ => "false".into(),
        }
    }
}
