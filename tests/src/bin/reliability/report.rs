//! What a case is and what it reports.

use settle::Form;
use settle_conformance::Backend;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// every job acked
    Load,
    /// random ack / drop / retry / retry_after / dead letter
    Mixed,
    /// every job acked, rows of 16 ordering keys: one row of a key at a
    /// time, each key's rows in id order
    KeyedLoad,
    /// as KeyedLoad, with one key's backlog in front of more keys than a
    /// claim visits at once: claims read bounded, in steps, and walk the keys
    KeyedBacklog,
    /// as Mixed, the rows of 16 ordering keys: a retried or delayed row
    /// holds its key back until it is settled for good or dead-lettered
    KeyedMixed,
    /// every worker connection terminated twice mid-run
    KillConnections,
    /// the PostgreSQL server restarted (fast, then immediate) mid-run
    Restart,
    /// the worker process killed with SIGKILL mid-run, then a new one started
    KillProcess,
    /// one worker process cut off the network (its link down) mid-run while another
    /// works on; the link comes back after the server has dropped its connections
    NetCut,
}

impl Scenario {
    /// Whether the rows carry ordering keys (the case checks the key rule).
    pub fn is_keyed(self) -> bool {
        matches!(
            self,
            Scenario::KeyedLoad | Scenario::KeyedBacklog | Scenario::KeyedMixed
        )
    }
}

/// One case's result: a line of the report.
pub struct Line {
    pub scenario: Scenario,
    pub backend: Backend,
    pub form: Form,
    pub jobs: usize,
    pub lost: i64,
    pub twice: u64,
    pub overlaps: u64,
    pub errors: u64,
    pub lease_lost: u64,
    pub left: usize,
    pub secs: f64,
    pub pass: bool,
    pub note: String,
}

pub fn form_name(f: Form) -> &'static str {
    match f {
        Form::RowLock => "row_lock",
        Form::Lease { .. } => "lease",
        Form::Advisory => "advisory",
    }
}

impl Line {
    pub fn header() -> String {
        format!(
            "{:<16} {:<12} {:<9} {:>7} {:>5} {:>6} {:>8} {:>7} {:>10} {:>5} {:>7}  result",
            "scenario",
            "backend",
            "form",
            "jobs",
            "lost",
            "twice",
            "overlaps",
            "errors",
            "lease_lost",
            "left",
            "secs"
        )
    }
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<16} {:<12} {:<9} {:>7} {:>5} {:>6} {:>8} {:>7} {:>10} {:>5} {:>7.1}  {}",
            format!("{:?}", self.scenario),
            format!("{:?}", self.backend),
            form_name(self.form),
            self.jobs,
            self.lost,
            self.twice,
            self.overlaps,
            self.errors,
            self.lease_lost,
            self.left,
            self.secs,
            if self.pass { "ok" } else { "FAILED" },
        )?;
        if !self.note.is_empty() {
            write!(f, " ({})", self.note)?;
        }
        Ok(())
    }
}
