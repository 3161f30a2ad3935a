//! The settle statements: one outcome's write (ack, drop, retry,
//! retry_after, and the move to the dead letter), the batched acks, and the
//! lease heartbeat.

use super::*;

impl Shape {
    /// One statement settling every held row of `$1` with one outcome.
    /// Params: $1 text[] ids, $2 timestamptz[] tokens, $3 timestamptz: when a
    /// retry_after row is ready again (bound, not computed in the statement:
    /// Citus refuses volatile functions in a distributed UPDATE).
    /// Rows: (id text, result text) for each row it settled; ids it did not
    /// return were not held.
    pub fn settle(&self, w: Write) -> String {
        let t = &self.table;
        let id = &self.id;
        let mut ctes = vec![self.held_cte()];
        let mut outs: Vec<String> = Vec::new();
        // writes find their rows by `id = ANY(ARRAY(...))`: an index scan whatever
        // the planner guesses about the CTE's size (a join can turn into a seq scan)
        let grp = self.in_group("_s_t");
        let on_held = |src: &str, filter: &str| {
            format!("{grp}_s_t.{id} {EQ} ANY (ARRAY(SELECT {src}._s_id FROM {src}{filter}))")
        };
        let write_cte =
            |ctes: &mut Vec<String>, name: &str, src: &str, sets: Vec<String>, filter: &str| {
                ctes.push(format!(
                "{name} AS (UPDATE {t} _s_t SET {sets} WHERE {on} RETURNING _s_t.{id} AS _s_id)",
                sets = sets.join(", "),
                on = on_held(src, filter)
            ));
            };
        match w {
            Write::Ack => {
                if let Some(p) = &self.processed_at {
                    write_cte(&mut ctes, "_s_o", "_s_h", vec![format!("{p} = {NOW}")], "");
                    outs.push(
                        "SELECT (_s_o._s_id)::pg_catalog.text, 'marked'::pg_catalog.text FROM _s_o"
                            .into(),
                    );
                } else {
                    ctes.push(format!(
                        "_s_o AS (DELETE FROM {t} _s_t WHERE {on} RETURNING _s_t.{id} AS _s_id)",
                        on = on_held("_s_h", "")
                    ));
                    outs.push("SELECT (_s_o._s_id)::pg_catalog.text, 'deleted'::pg_catalog.text FROM _s_o".into());
                }
            }
            Write::HeldOnly => {
                outs.push(
                    "SELECT (_s_h._s_id)::pg_catalog.text, 'held'::pg_catalog.text FROM _s_h"
                        .into(),
                );
            }
            Write::Release => {
                if let (Form::Lease, Some(lu)) = (self.form, &self.locked_until) {
                    write_cte(&mut ctes, "_s_o", "_s_h", vec![format!("{lu} = NULL")], "");
                    outs.push("SELECT (_s_o._s_id)::pg_catalog.text, 'released'::pg_catalog.text FROM _s_o".into());
                } else {
                    outs.push("SELECT (_s_h._s_id)::pg_catalog.text, 'released'::pg_catalog.text FROM _s_h".into());
                }
            }
            Write::Retry | Write::RetryAfter => {
                ctes.push(format!(
                    "_s_x AS (SELECT _s_id, {} AS _s_dead FROM _s_h)",
                    self.dead_flag("_s_att")
                ));
                if self.moves_dead_apart() {
                    outs.push("SELECT (_s_x._s_id)::pg_catalog.text, 'to_dead'::pg_catalog.text FROM _s_x WHERE _s_x._s_dead".into());
                } else if self.dead.is_some() {
                    ctes.extend(self.dead_ctes("_s_x"));
                    outs.push("SELECT (_s_d._s_id)::pg_catalog.text, 'dead_lettered'::pg_catalog.text FROM _s_d".into());
                }
                let mut sets = Vec::new();
                let delayed = w == Write::RetryAfter && self.retry_after.is_some();
                if delayed {
                    sets.push(format!("{} = $3", self.retry_after.as_ref().unwrap()));
                }
                if self.form == Form::RowLock {
                    sets.extend(self.attempt_plus_one("_s_t"));
                }
                if self.form == Form::Lease {
                    sets.push(format!("{} = NULL", self.locked_until.as_ref().unwrap()));
                }
                let result = if delayed {
                    "delayed"
                } else if sets.is_empty() && self.form == Form::RowLock {
                    // row_lock without an attempt column: nothing to write, the
                    // transaction's end returns the row as it was
                    "released"
                } else {
                    "retried"
                };
                if sets.is_empty() {
                    outs.push(format!(
                        "SELECT (_s_x._s_id)::pg_catalog.text, '{result}'::pg_catalog.text FROM _s_x WHERE NOT _s_x._s_dead"
                    ));
                } else {
                    write_cte(&mut ctes, "_s_r", "_s_x", sets, " WHERE NOT _s_x._s_dead");
                    outs.push(format!(
                        "SELECT (_s_r._s_id)::pg_catalog.text, '{result}'::pg_catalog.text FROM _s_r"
                    ));
                }
            }
        }
        format!("WITH {}\n{}", ctes.join(",\n "), outs.join("\nUNION ALL "))
    }

    /// Ack / drop of many deliveries in one pass (no held-check CTE): the held
    /// condition is part of the write. Params: $1 text[] ids, $2 timestamptz[] tokens.
    pub fn ack_many(&self) -> String {
        let id = self.id_of("_s_t");
        let mut cond = self.mine("_s_t");
        let mut from: Option<String> = None;
        match self.form {
            Form::Lease => {
                from = Some("ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS _s_in(_s_id, _s_tok)".into());
                cond.push(format!("{id} {EQ} {}", self.cast_id("_s_in._s_id")));
                cond.push(format!(
                    "{} {EQ} _s_in._s_tok",
                    self.col("_s_t", self.locked_until.as_ref().unwrap())
                ));
            }
            // row_lock: only rows this transaction holds reach the statement (the
            // claim list is exact under savepoints); advisory: the caller checked the key
            Form::RowLock | Form::Advisory => cond.push(format!(
                "{id} {EQ} ANY (($1::pg_catalog.text[])::{}[])",
                self.id_type
            )),
        }
        self.ack_write(from.as_deref(), &join_and(cond))
    }

    /// Lease ack / drop of many deliveries that share one token (claimed
    /// together): `id = ANY($1) AND locked_until = $2`, one index scan over the
    /// sorted ids, where [`ack_many`](Self::ack_many) joins id-token pairs and
    /// descends the index once per pair. Params: $1 text[] ids, $2 timestamptz.
    pub fn ack_many_one_token(&self) -> String {
        let id = self.id_of("_s_t");
        let mut cond = self.mine("_s_t");
        cond.push(format!(
            "{id} {EQ} ANY (($1::pg_catalog.text[])::{}[])",
            self.id_type
        ));
        cond.push(format!(
            "{} {EQ} $2",
            self.col("_s_t", self.locked_until.as_ref().unwrap())
        ));
        self.ack_write(None, &join_and(cond))
    }

    /// The statement ack and drop write: mark processed_at, or delete. `with`
    /// is a relation joined in (UPDATE … FROM / DELETE … USING).
    fn ack_write(&self, with: Option<&str>, cond: &str) -> String {
        let (t, id) = (&self.table, self.id_of("_s_t"));
        match &self.processed_at {
            Some(p) => format!(
                "UPDATE {t} _s_t SET {p} = {NOW}{} WHERE {cond} RETURNING ({id})::pg_catalog.text, 'marked'::pg_catalog.text",
                with.map_or(String::new(), |w| format!(" FROM {w}"))
            ),
            None => format!(
                "DELETE FROM {t} _s_t{} WHERE {cond} RETURNING ({id})::pg_catalog.text, 'deleted'::pg_catalog.text",
                with.map_or(String::new(), |w| format!(" USING {w}"))
            ),
        }
    }

    /// The hot path: ack / drop of one delivery, one plain statement.
    /// Params: $1 text id, $2 timestamptz token (lease; unused otherwise).
    /// Returns (id text, result) when the row was held and is now settled.
    pub fn ack_one(&self) -> String {
        let id = self.id_of("_s_t");
        let mut cond = self.mine("_s_t");
        match self.form {
            Form::Lease => {
                cond.push(format!("{id} {EQ} {}", self.cast_id("$1")));
                cond.push(format!(
                    "{} {EQ} $2",
                    self.col("_s_t", self.locked_until.as_ref().unwrap())
                ));
            }
            // row_lock: only a row this transaction holds reaches the statement (the
            // claim list is exact under savepoints); advisory: the caller checked the key
            Form::RowLock | Form::Advisory => {
                cond.push(format!("{id} {EQ} {}", self.cast_id("$1")))
            }
        }
        self.ack_write(None, &join_and(cond))
    }

    /// row_lock ack / drop of rows found by the ctid their claim locked: a TID
    /// scan, no index descent per row (the by-id DELETE's largest cost after the
    /// claim). Params: $1 tid[]. Sound because the claim list is exact: the
    /// version a row lock of this transaction holds cannot be pruned while the
    /// transaction runs, so its ctid names that row, and if this transaction has
    /// since updated or deleted the row, that version is invisible and the row
    /// is not returned (the caller falls back to [`ack_many`](Self::ack_many)).
    pub fn ack_tids(&self) -> String {
        let mut cond = self.mine("_s_t");
        cond.push(format!("_s_t.ctid {EQ} ANY ($1::pg_catalog.tid[])"));
        self.ack_write(None, &join_and(cond))
    }

    /// Lease heartbeat. Params: $1 text id, $2 timestamptz token, $3 timestamptz new token.
    pub fn extend(&self) -> String {
        let lu = self.locked_until.as_ref().unwrap();
        let mut cond = self.mine("_s_t");
        cond.push(format!(
            "{} {EQ} {}",
            self.id_of("_s_t"),
            self.cast_id("$1")
        ));
        cond.push(format!("_s_t.{lu} {EQ} $2"));
        format!(
            "UPDATE {t} _s_t SET {lu} = $3 WHERE {cond} RETURNING _s_t.{lu}",
            t = self.table,
            cond = join_and(cond)
        )
    }
}
