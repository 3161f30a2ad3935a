//! What each SQL function does: claim in three forms, settle with an outcome,
//! extend, release, stats, requeue. SQL text comes from `sql.rs`, plans from
//! `desc.rs`; these modules decide, check arguments and keep advisory state.

mod claim;
mod dead;
mod info;
mod reach;
mod rows;
mod settle;
mod time;

pub use claim::claim;
pub use info::{dead_rows, purge_dead, requeue_dead, statements, stats};
pub use settle::{complete_one, extend, release_one, settle, Action, Outcome};
