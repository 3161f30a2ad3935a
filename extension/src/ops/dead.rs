//! Moves into the dead letter that a claim or a settle runs as statements of
//! their own.

use crate::desc::{PlanKey, Queue};
use pgrx::pg_sys;
use pgrx::spi::SpiClient;

/// A retry at max_attempts moved the row to the dead letter.
pub(super) fn warn_dead(q: &Queue, id: &str) {
    warn_moved(q, id, crate::error::DEAD_LETTERED_AT_SETTLE, "");
}

/// A claim moved a crash-looping row to the dead letter instead of delivering it.
pub(super) fn warn_dead_at_claim(q: &Queue, id: &str) {
    warn_moved(
        q,
        id,
        crate::error::DEAD_LETTERED_AT_CLAIM,
        " without an outcome (a crash loop)",
    );
}

fn warn_moved(q: &Queue, id: &str, code: &str, how: &str) {
    let s = &q.shape;
    crate::error::warn(
        code,
        &format!(
            "settle: queue \"{}\": row {} reached max_attempts ({}){how} and was moved to the dead letter",
            s.queue,
            id,
            s.max_attempts.unwrap_or_default()
        ),
    );
}

/// Move the rows a take flagged dead (`Shape::take`) into the dead letter. The
/// claim holds them, so every one is moved; anything else is a bug, and the
/// claim fails (its transaction rolls back) rather than lose a row.
pub(super) fn move_taken_dead(client: &SpiClient<'_>, q: &Queue, dead: &[String]) {
    if dead.is_empty() {
        return;
    }
    let ids: Vec<&str> = dead.iter().map(|s| s.as_str()).collect();
    if q.shape.moves_dead_apart() {
        move_dead_apart(client, q, &ids, true);
        return;
    }
    q.settle_plan(client, PlanKey::MoveTakenDead)
        .run(&[ids.into()]);
    // SAFETY: right after the statement ran
    let moved = unsafe { pg_sys::SPI_processed } as usize;
    assert_eq!(
        moved,
        dead.len(),
        "settle: queue \"{}\": a claim moved {moved} of the {} rows it took past max_attempts",
        q.shape.queue,
        dead.len()
    );
}

/// Move rows the caller holds into the dead-letter table with the two routed
/// statements of a distributed table (`Shape::moves_dead_apart`); `taken`: rows
/// a claim's take just counted. Every row is moved, or the call fails.
pub(super) fn move_dead_apart(client: &SpiClient<'_>, q: &Queue, ids: &[&str], taken: bool) {
    let mut moved = [0usize; 2];
    for (n, key) in [PlanKey::DeadCopy { taken }, PlanKey::DeadDelete]
        .into_iter()
        .enumerate()
    {
        q.settle_plan(client, key).run(&[ids.into()]);
        // SAFETY: right after the statement ran
        moved[n] = unsafe { pg_sys::SPI_processed } as usize;
    }
    assert!(
        moved == [ids.len(); 2],
        "settle: queue \"{}\": a dead-letter move copied {} and deleted {} of {} rows",
        q.shape.queue,
        moved[0],
        moved[1],
        ids.len()
    );
}
