//! Connection-pool settings, the same on both backends.

use std::time::Duration;

/// Connection-pool settings, the same on both backends.
///
/// Row_lock and advisory deliveries keep their connection until they are
/// settled, so at most `max_size` of them (counted per claim, not per row) can
/// be live at once; a claim or settle that finds every connection busy waits
/// `wait_timeout` and then fails with [`crate::Error::PoolTimeout`] — it never waits
/// forever, and nothing is claimed or written by the call that timed out.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Connections in the pool (at least 1).
    pub max_size: usize,
    /// How long a call waits for a free connection; `None` waits forever. (On
    /// the portable path this includes opening a new one when the pool has room.)
    pub wait_timeout: Option<Duration>,
    /// How long opening a new connection may take; `None` leaves it to the driver.
    pub connect_timeout: Option<Duration>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_size: 16,
            wait_timeout: Some(Duration::from_secs(30)),
            connect_timeout: Some(Duration::from_secs(10)),
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
}
