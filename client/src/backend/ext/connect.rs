//! Connections to PostgreSQL with the extension: TLS as the connection string
//! says ([`crate::tls`]), the server's notices read rather than dropped, and
//! the pool the backend and [`crate::Admin`] use.

use crate::conninfo::ConnInfo;
use crate::error::{Error, Result};
use crate::pool::PoolOptions;
use deadpool_postgres::{Connect, Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

/// What a connection does with the server's notices.
#[derive(Clone, Default)]
pub(crate) struct Notices {
    /// the client's queue and its dead-lettered counter: a claim that moved
    /// a crash-looping row to the dead letter says so only in a WARNING
    /// (SQLSTATE [`DEAD_LETTERED_AT_CLAIM`])
    pub queue: Option<(String, metrics::Counter)>,
}

/// The extension's WARNING for a row a claim moved to the dead letter.
pub(crate) const DEAD_LETTERED_AT_CLAIM: &str = "01SQ2";
/// The extension's WARNING for a row a retry moved to the dead letter (the
/// settle's result reports it).
const DEAD_LETTERED_AT_SETTLE: &str = "01SQ1";

impl Notices {
    fn on_notice(&self, n: &tokio_postgres::error::DbError) {
        use tokio_postgres::error::Severity;
        let code = n.code().code();
        match code {
            DEAD_LETTERED_AT_CLAIM => {
                let queue = self.queue.as_ref().map_or("", |(q, _)| q.as_str());
                tracing::warn!(queue = %queue, code, "{}", n.message());
                if let Some((_, dead)) = &self.queue {
                    dead.increment(1);
                }
            }
            DEAD_LETTERED_AT_SETTLE => tracing::debug!(code, "{}", n.message()),
            _ if n.parsed_severity() == Some(Severity::Warning) => {
                tracing::warn!(code, "{}", n.message())
            }
            _ => tracing::debug!(code, "{}", n.message()),
        }
    }
}

/// Opens the pool's connections: TLS per the settings, notices to [`Notices`].
struct ExtConnect {
    tls: Option<MakeRustlsConnect>,
    notices: Notices,
}

impl Connect for ExtConnect {
    fn connect(
        &self,
        pg_config: &tokio_postgres::Config,
    ) -> BoxFuture<
        '_,
        std::result::Result<(tokio_postgres::Client, JoinHandle<()>), tokio_postgres::Error>,
    > {
        let pg_config = pg_config.clone();
        Box::pin(async move {
            let notices = self.notices.clone();
            open(&pg_config, self.tls.as_ref(), move |m| {
                if let AsyncMessage::Notice(n) = m {
                    notices.on_notice(&n);
                }
                true
            })
            .await
        })
    }
}

/// Open one connection and drive it in a task that hands every message to
/// `on_message` until it returns false or the connection ends.
async fn open(
    config: &tokio_postgres::Config,
    tls: Option<&MakeRustlsConnect>,
    on_message: impl FnMut(AsyncMessage) -> bool + Send + 'static,
) -> std::result::Result<(tokio_postgres::Client, JoinHandle<()>), tokio_postgres::Error> {
    let Some(tls) = tls else {
        let (client, conn) = config.connect(tokio_postgres::NoTls).await?;
        return Ok((client, tokio::spawn(drive(conn, on_message))));
    };
    let failed = match config.connect(tls.clone()).await {
        Ok((client, conn)) => return Ok((client, tokio::spawn(drive(conn, on_message)))),
        Err(e) => e,
    };
    // prefer (and allow), as in libpq: a TLS handshake that fails is tried
    // again without TLS; if that fails too, the TLS error says more
    let prefer = config.get_ssl_mode() == tokio_postgres::config::SslMode::Prefer;
    if !prefer || crate::error::handshake_failure(&failed).is_none() {
        return Err(failed);
    }
    tracing::debug!(error = %failed, "TLS failed under sslmode=prefer: connecting without it");
    let mut plain = config.clone();
    plain.ssl_mode(tokio_postgres::config::SslMode::Disable);
    match plain.connect(tokio_postgres::NoTls).await {
        Ok((client, conn)) => Ok((client, tokio::spawn(drive(conn, on_message)))),
        Err(_) => Err(failed),
    }
}

async fn drive<S, T>(
    mut conn: tokio_postgres::Connection<S, T>,
    mut on_message: impl FnMut(AsyncMessage) -> bool,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
    while let Some(m) = messages.next().await {
        match m {
            Ok(m) => {
                if !on_message(m) {
                    return;
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "connection ended");
                return;
            }
        }
    }
}

/// The TLS connector for these settings; None when TLS is off.
fn connector(info: &ConnInfo) -> Result<Option<MakeRustlsConnect>> {
    if !info.tls.enabled() {
        return Ok(None);
    }
    Ok(Some(MakeRustlsConnect::new(info.tls.rustls_config()?)))
}

/// How a backend reaches the server: the pool, and what opens further
/// connections (the worker's LISTEN).
#[derive(Clone)]
pub(crate) struct Connector {
    config: tokio_postgres::Config,
    tls: Option<MakeRustlsConnect>,
}

impl Connector {
    pub(crate) fn new(info: &ConnInfo, pool: &PoolOptions) -> Result<Connector> {
        let mut config = info.config.clone();
        if let Some(t) = pool.connect_timeout {
            if config.get_connect_timeout().is_none() {
                config.connect_timeout(t);
            }
        }
        if let Some(d) = pool.rescan_interval {
            let ms = d.as_millis().min(3_600_000);
            let set = format!("-c settle.rescan_interval={ms}");
            let options = match config.get_options() {
                Some(o) if !o.is_empty() => format!("{o} {set}"),
                _ => set,
            };
            config.options(&options);
        }
        Ok(Connector {
            config,
            tls: connector(info)?,
        })
    }

    /// A deadpool over these connections with `pool`'s settings.
    pub(crate) fn pool(&self, pool: &PoolOptions, notices: Notices) -> Result<Pool> {
        let mgr = Manager::from_connect(
            self.config.clone(),
            ExtConnect {
                tls: self.tls.clone(),
                notices,
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(mgr)
            .max_size(pool.max_size.max(1))
            .wait_timeout(pool.wait_timeout)
            .create_timeout(pool.connect_timeout)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| Error::invalid(format!("pool: {e}")))
    }

    /// One connection of its own, whose messages go to `on_message`.
    pub(crate) async fn open(
        &self,
        on_message: impl FnMut(AsyncMessage) -> bool + Send + 'static,
    ) -> Result<(tokio_postgres::Client, JoinHandle<()>)> {
        Ok(open(&self.config, self.tls.as_ref(), on_message).await?)
    }
}

/// Statements sent as prepared (named, kept per connection) or unnamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Statements {
    /// prepared once per connection and kept (the default)
    Prepared,
    /// parsed with every call, under no name: what a transaction pooler,
    /// which may run each transaction on another server session, can carry
    Unnamed,
}

/// One statement of the SQL API with its parameter types.
pub(crate) struct Stmt {
    pub sql: &'static str,
    pub types: &'static [tokio_postgres::types::Type],
}

impl Statements {
    /// Unnamed behind a transaction pooler, else prepared.
    pub(crate) fn of(pool: &PoolOptions) -> Statements {
        if pool.transaction_pooler {
            Statements::Unnamed
        } else {
            Statements::Prepared
        }
    }

    /// `st` ready to run on `c`: prepared (a round trip the first time on a
    /// connection), or as it is.
    pub(crate) async fn ready<'a>(
        self,
        c: &deadpool_postgres::Object,
        st: &'a Stmt,
    ) -> std::result::Result<Ready<'a>, tokio_postgres::Error> {
        Ok(match self {
            Statements::Prepared => Ready::Named(c.prepare_typed_cached(st.sql, st.types).await?),
            Statements::Unnamed => Ready::Unnamed(st),
        })
    }

    /// Run `st` with `params` on `c`.
    pub(crate) async fn query(
        self,
        c: &deadpool_postgres::Object,
        st: &Stmt,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        self.ready(c, st).await?.query(c, params).await
    }

    /// [`Statements::query`] of a statement that returns one row.
    pub(crate) async fn query_one(
        self,
        c: &deadpool_postgres::Object,
        st: &Stmt,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<tokio_postgres::Row> {
        let mut rows = self.query(c, st, params).await?;
        match rows.len() {
            1 => Ok(rows.remove(0)),
            n => Err(Error::database(
                None,
                format!("{} returned {n} rows, not one", st.sql),
            )),
        }
    }
}

/// A statement ready to run. Its query is sent when the future is first
/// polled, in one message, so futures polled in turn reach the server in
/// that order (see `session::fenced`).
pub(crate) enum Ready<'a> {
    Named(tokio_postgres::Statement),
    Unnamed(&'a Stmt),
}

impl Ready<'_> {
    pub(crate) async fn query(
        &self,
        c: &deadpool_postgres::Object,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        match self {
            Ready::Named(prepared) => c.query(prepared, params).await,
            Ready::Unnamed(st) => {
                let typed: Vec<(
                    &(dyn tokio_postgres::types::ToSql + Sync),
                    tokio_postgres::types::Type,
                )> = params
                    .iter()
                    .copied()
                    .zip(st.types.iter().cloned())
                    .collect();
                c.query_typed(st.sql, &typed).await
            }
        }
    }
}
