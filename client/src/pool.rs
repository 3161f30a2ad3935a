//! Connection-pool settings, the same on both backends.

use std::time::Duration;

/// Connection-pool settings, the same on both backends.
///
/// Row_lock and advisory deliveries keep their connection until they are
/// settled, so at most `max_size` of them (counted per claim, not per row) can
/// be live at once; a claim or settle that finds every connection busy waits
/// `wait_timeout` and then fails with [`crate::Error::PoolTimeout`] — it never waits
/// forever, and nothing is claimed or written by the call that timed out.
///
/// Open connections stay open while the pool lives, on both backends: no
/// idle timeout or maximum lifetime closes them. One that the server closed
/// while it sat idle is replaced before a call gets it (the portable path
/// also pings a connection idle for 30 s or more first); one that breaks
/// under a statement fails that statement and is replaced.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Connections in the pool (at least 1).
    pub max_size: usize,
    /// How long a call waits for a free connection; `None` waits forever. (On
    /// the portable path this includes opening a new one when the pool has room.)
    pub wait_timeout: Option<Duration>,
    /// How long opening a new connection may take; `None` leaves it to the driver.
    pub connect_timeout: Option<Duration>,
    /// The connections go through a transaction pooler (PgBouncer
    /// `pool_mode=transaction`, RDS Proxy, Supavisor's transaction port),
    /// which may run each transaction on another server session. The
    /// extension client then sends no named prepared statements (each call is
    /// parsed under no name, in the same round trip), opens no LISTEN
    /// connection (the worker polls), and refuses the advisory form, whose
    /// locks belong to a session. The lease and row_lock forms work. The
    /// portable path refuses it: put it behind session pooling.
    pub transaction_pooler: bool,
    /// How often this client's claims of a queue scan from its lowest id
    /// (docs/semantics.md, "Claim order"); between those scans a claim starts
    /// at the last id the client claimed, so it does not walk the rows
    /// settled before, which a long transaction keeps in the index. `None`:
    /// the database's setting (extension: `settle.rescan_interval`, 1 s by
    /// default; portable path: 1 s). Zero: every claim from the lowest id. On
    /// the extension it is sent as a startup option, which PgBouncer passes
    /// only when `ignore_startup_parameters` lists `options`; set it on the
    /// role instead behind a pooler.
    pub rescan_interval: Option<Duration>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_size: 16,
            wait_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Some(Duration::from_secs(10)),
            transaction_pooler: false,
            rescan_interval: None,
        }
    }
}

impl PoolOptions {
    /// `max_size` connections with the default timeouts (30 s wait, 10 s connect).
    pub fn new(max_size: usize) -> Self {
        PoolOptions {
            max_size: max_size.max(1),
            ..Default::default()
        }
    }

    /// Set how long a call waits for a free connection.
    pub fn wait_timeout(mut self, d: Option<Duration>) -> Self {
        self.wait_timeout = d;
        self
    }

    /// Set how long opening a connection may take.
    pub fn connect_timeout(mut self, d: Option<Duration>) -> Self {
        self.connect_timeout = d;
        self
    }

    /// Set how often claims scan from the lowest id (see
    /// [`PoolOptions::rescan_interval`]).
    pub fn rescan_interval(mut self, d: Duration) -> Self {
        self.rescan_interval = Some(d);
        self
    }

    /// Say whether the connections go through a transaction pooler (see
    /// [`PoolOptions::transaction_pooler`]).
    pub fn transaction_pooler(mut self, yes: bool) -> Self {
        self.transaction_pooler = yes;
        self
    }
}
