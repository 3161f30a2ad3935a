//! Where a PostgreSQL server is and how to reach it, read the way libpq reads
//! it: a URL (`postgres://…?sslmode=verify-full`) or a `key=value` string,
//! with the `PG*` environment filling what the string leaves out, and
//! libpq's TLS settings (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`), which
//! tokio-postgres does not parse itself (it knows `disable`, `prefer` and
//! `require` only), so they are taken out of the string here.

use crate::error::{Error, Result};
use crate::tls::{TlsGiven, TlsSettings};
use std::str::FromStr;

/// A PostgreSQL connection: the tokio-postgres config and its TLS settings.
///
/// ```
/// # fn main() -> settle::Result<()> {
/// let c: settle::ConnInfo =
///     "postgres://app@db.example.com/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem".parse()?;
/// assert_eq!(c.ssl_mode(), "verify-full");
/// let c: settle::ConnInfo = "host=db.example.com dbname=app user=app sslmode=require".parse()?;
/// assert_eq!(c.config().get_dbname(), Some("app"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ConnInfo {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: TlsSettings,
}

/// Anything a PostgreSQL connection can be made from: a connection string
/// (`&str`, `String`), a [`ConnInfo`], or a `tokio_postgres::Config` (whose
/// own `ssl_mode` — disable, prefer or require — is kept, with libpq's
/// defaults and `PGSSL*` variables for the certificates).
pub trait IntoConnInfo {
    /// The connection, or the reason the string is not one.
    fn into_conn_info(self) -> Result<ConnInfo>;
}

impl IntoConnInfo for ConnInfo {
    fn into_conn_info(self) -> Result<ConnInfo> {
        Ok(self)
    }
}

impl IntoConnInfo for &str {
    fn into_conn_info(self) -> Result<ConnInfo> {
        self.parse()
    }
}

impl IntoConnInfo for String {
    fn into_conn_info(self) -> Result<ConnInfo> {
        self.parse()
    }
}

impl IntoConnInfo for &String {
    fn into_conn_info(self) -> Result<ConnInfo> {
        self.parse()
    }
}

impl IntoConnInfo for tokio_postgres::Config {
    fn into_conn_info(self) -> Result<ConnInfo> {
        let mode = match self.get_ssl_mode() {
            tokio_postgres::config::SslMode::Disable => "disable",
            tokio_postgres::config::SslMode::Require => "require",
            _ => "prefer",
        };
        let tls = TlsSettings::resolve(
            TlsGiven {
                mode: Some(mode.to_owned()),
                ..TlsGiven::default()
            },
            &env,
        )?;
        Ok(ConnInfo::with_tls(self, tls))
    }
}

impl FromStr for ConnInfo {
    type Err = Error;

    fn from_str(s: &str) -> Result<ConnInfo> {
        ConnInfo::parse_with(s, &env)
    }
}

/// The process environment, as the parsers read it.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The TLS keys libpq knows and tokio-postgres does not parse.
const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

impl ConnInfo {
    /// `config` with `tls`; as in libpq, TLS is not used on Unix-domain sockets
    /// (the server does not offer it there), so a config whose every host is
    /// one connects without it, whatever the sslmode.
    fn with_tls(mut config: tokio_postgres::Config, tls: TlsSettings) -> ConnInfo {
        let unix_only = !config.get_hosts().is_empty()
            && config.get_hostaddrs().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|h| !matches!(h, tokio_postgres::config::Host::Tcp(_)));
        let tls = if unix_only { tls.disabled() } else { tls };
        config.ssl_mode(tls.tokio_mode());
        ConnInfo { config, tls }
    }

    /// Parse a URL or `key=value` string, reading `PG*` variables from `env`.
    pub(crate) fn parse_with(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<ConnInfo> {
        let (rest, tls) = split_tls(s)?;
        let mut config: tokio_postgres::Config = rest
            .parse()
            .map_err(|e| Error::invalid(format!("connection string: {e}")))?;
        fill_from_env(&mut config, env)?;
        let tls = TlsSettings::resolve(tls, env)?;
        Ok(ConnInfo::with_tls(config, tls))
    }

    /// The tokio-postgres config (its `ssl_mode` is disable, prefer or
    /// require; the certificates are checked as [`ConnInfo::ssl_mode`] says).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// libpq's `sslmode`: `disable`, `allow`, `prefer`, `require`,
    /// `verify-ca` or `verify-full`.
    pub fn ssl_mode(&self) -> &'static str {
        self.tls.mode_name()
    }
}

/// Take libpq's TLS keys out of a connection string: the rest (for
/// tokio-postgres) and what they said.
fn split_tls(s: &str) -> Result<(String, TlsGiven)> {
    let mut given = TlsGiven::default();
    let mut take = |k: &str, v: String| match k {
        "sslmode" => given.mode = Some(v),
        "sslrootcert" => given.root = Some(v),
        "sslcert" => given.cert = Some(v),
        _ => given.key = Some(v),
    };
    let trimmed = s.trim_start();
    if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
        let Some((base, query)) = trimmed.split_once('?') else {
            return Ok((trimmed.to_owned(), given));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = percent_decode(k)?;
            if TLS_KEYS.contains(&key.as_str()) {
                take(&key, percent_decode(v)?);
            } else {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, given));
    }
    let mut rest = String::new();
    for (k, v) in key_values(s)? {
        if TLS_KEYS.contains(&k.as_str()) {
            take(&k, v);
        } else {
            rest.push_str(&format!(
                "{k}='{}' ",
                v.replace('\\', "\\\\").replace('\'', "\\'")
            ));
        }
    }
    Ok((rest, given))
}

/// The pairs of a libpq `key=value` string: values unquoted (up to the next
/// space) or in single quotes, `\` escaping the next character in either.
fn key_values(s: &str) -> Result<Vec<(String, String)>> {
    let bad = |why: &str| Error::invalid(format!("connection string: {why}"));
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        while it.peek().is_some_and(|c| c.is_whitespace()) {
            it.next();
        }
        if it.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = it.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            it.next();
        }
        while it.peek().is_some_and(|c| c.is_whitespace()) {
            it.next();
        }
        if it.next() != Some('=') {
            return Err(bad(&format!("missing \"=\" after \"{key}\"")));
        }
        while it.peek().is_some_and(|c| c.is_whitespace()) {
            it.next();
        }
        let mut value = String::new();
        if it.peek() == Some(&'\'') {
            it.next();
            loop {
                match it.next() {
                    None => return Err(bad("unterminated quoted value")),
                    Some('\\') => value.extend(it.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = it.peek() {
                if c.is_whitespace() {
                    break;
                }
                it.next();
                if c == '\\' {
                    value.extend(it.next());
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
}

fn percent_decode(s: &str) -> Result<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|e| Error::invalid(format!("connection string: {e}")))
}

/// libpq's environment defaults for what the string left out.
fn fill_from_env(
    config: &mut tokio_postgres::Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let bad = |name: &str, v: &str| Error::invalid(format!("{name}={v:?} is not valid"));
    if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
        match (env("PGHOST"), env("PGHOSTADDR")) {
            (Some(h), _) => {
                for h in h.split(',') {
                    config.host(h);
                }
            }
            (None, Some(a)) => {
                for a in a.split(',') {
                    config.hostaddr(a.parse().map_err(|_| bad("PGHOSTADDR", a))?);
                }
            }
            // libpq's default: the server's socket directory, else localhost
            (None, None) if std::path::Path::new("/var/run/postgresql").is_dir() => {
                config.host("/var/run/postgresql");
            }
            (None, None) => {
                config.host("localhost");
            }
        }
    }
    if config.get_ports().is_empty() {
        if let Some(p) = env("PGPORT") {
            for p in p.split(',') {
                config.port(p.parse().map_err(|_| bad("PGPORT", p))?);
            }
        }
    }
    if config.get_user().is_none() {
        if let Some(u) = env("PGUSER").or_else(|| env("USER")) {
            config.user(&u);
        }
    }
    if config.get_password().is_none() {
        if let Some(p) = env("PGPASSWORD") {
            config.password(p);
        }
    }
    if config.get_dbname().is_none() {
        if let Some(d) = env("PGDATABASE") {
            config.dbname(&d);
        }
    }
    if config.get_application_name().is_none() {
        if let Some(a) = env("PGAPPNAME") {
            config.application_name(&a);
        }
    }
    if config.get_options().is_none() {
        if let Some(o) = env("PGOPTIONS") {
            config.options(&o);
        }
    }
    if config.get_connect_timeout().is_none() {
        if let Some(t) = env("PGCONNECT_TIMEOUT") {
            let secs: u64 = t.parse().map_err(|_| bad("PGCONNECT_TIMEOUT", &t))?;
            config.connect_timeout(std::time::Duration::from_secs(secs.max(2)));
        }
    }
    Ok(())
}

/// A `postgres://` URL for sqlx with libpq's TLS rules applied (see
/// [`TlsSettings::resolve`]): the resolved `sslmode`, root and client
/// certificates written as URL parameters, `sslrootcert=system` as none (sqlx
/// then trusts the operating system's store).
pub(crate) fn sqlx_postgres_url(url: &str) -> Result<String> {
    sqlx_postgres_url_with(url, &env)
}

pub(crate) fn sqlx_postgres_url_with(
    url: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String> {
    let (rest, given) = split_tls(url)?;
    let root_from_env = given.root.is_none() && env("PGSSLROOTCERT").is_some();
    let tls = TlsSettings::resolve(given, env)?;
    if root_from_env && tls.root_is_system() {
        return Err(Error::invalid(
            "PGSSLROOTCERT=system is not read on the portable path: put sslrootcert=system in the URL",
        ));
    }
    let mut params = vec![("sslmode", tls.sqlx_mode().to_owned())];
    if let Some(f) = tls.root_file() {
        params.push(("sslrootcert", f.display().to_string()));
    }
    if let Some((cert, key)) = tls.client_files() {
        params.push(("sslcert", cert.display().to_string()));
        params.push(("sslkey", key.display().to_string()));
    }
    // what would end or change a query value
    const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
        .add(b' ')
        .add(b'#')
        .add(b'%')
        .add(b'&')
        .add(b'+')
        .add(b'=');
    let enc = |s: &str| percent_encoding::utf8_percent_encode(s, QUERY_VALUE).to_string();
    let extra: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    let sep = if rest.contains('?') { '&' } else { '?' };
    Ok(format!("{rest}{sep}{}", extra.join("&")))
}

/// The `postgres://` URL of [`sqlx_postgres_url`] without TLS, when its
/// sslmode lets a connection go without (`prefer`, `allow`): libpq's retry
/// after a failed handshake.
pub(crate) fn sqlx_postgres_plain(url: &str) -> Option<String> {
    let (base, query) = url.split_once('?')?;
    let mut found = false;
    let params: Vec<&str> = query
        .split('&')
        .map(|p| match p {
            "sslmode=prefer" | "sslmode=allow" => {
                found = true;
                "sslmode=disable"
            }
            p => p,
        })
        .collect();
    found.then(|| format!("{base}?{}", params.join("&")))
}

/// A `mysql://` URL for sqlx: a connection over a Unix socket (`socket=`) is
/// local, and without an `ssl-mode` of its own it does not use TLS (as libpq
/// does not on PostgreSQL's sockets); everything else is as given (MySQL's
/// `ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key`; sqlx's default `PREFERRED`).
pub(crate) fn sqlx_mysql_url(url: &str) -> String {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let keys: Vec<&str> = query
        .split('&')
        .map(|p| p.split_once('=').map_or(p, |(k, _)| k))
        .collect();
    let has = |k: &str| keys.contains(&k);
    if has("socket") && !has("ssl-mode") && !has("sslmode") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}ssl-mode=DISABLED")
    } else {
        url.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn key_values_follow_libpq_quoting() {
        let e = key_values("host db").unwrap_err();
        assert!(e.to_string().contains("missing \"=\""), "{e}");
        let kv =
            key_values(r"host=db port = 5433 password='it\'s' dbname='my db' user=a\ b").unwrap();
        assert_eq!(
            kv,
            [
                ("host", "db"),
                ("port", "5433"),
                ("password", "it's"),
                ("dbname", "my db"),
                ("user", "a b")
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert!(key_values("host='db").is_err());
    }

    #[test]
    fn tls_keys_leave_the_string_for_tokio_postgres() {
        let c = ConnInfo::parse_with(
            "host=db dbname='my db' sslmode=verify-ca sslrootcert=/tmp/ca.pem user=app",
            &no_env,
        )
        .unwrap();
        assert_eq!(c.ssl_mode(), "verify-ca");
        assert_eq!(c.config.get_dbname(), Some("my db"));
        assert_eq!(c.config.get_user(), Some("app"));
        assert_eq!(
            c.config.get_ssl_mode(),
            tokio_postgres::config::SslMode::Require
        );
        let c = ConnInfo::parse_with(
            "postgresql://app:p%40ss@db:6432/app?application_name=w&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem",
            &no_env,
        )
        .unwrap();
        assert_eq!(c.ssl_mode(), "verify-full");
        assert_eq!(c.config.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(c.config.get_application_name(), Some("w"));
        assert_eq!(c.config.get_ports(), &[6432]);
    }

    #[test]
    fn the_environment_fills_what_the_string_leaves_out() {
        let env = |k: &str| match k {
            "PGHOST" => Some("h1,h2".to_owned()),
            "PGPORT" => Some("5433".to_owned()),
            "PGUSER" => Some("envuser".to_owned()),
            "PGDATABASE" => Some("envdb".to_owned()),
            "PGSSLMODE" => Some("require".to_owned()),
            _ => None,
        };
        let c = ConnInfo::parse_with("user=given", &env).unwrap();
        assert_eq!(c.config.get_user(), Some("given"));
        assert_eq!(c.config.get_dbname(), Some("envdb"));
        assert_eq!(c.config.get_ports(), &[5433]);
        assert_eq!(c.config.get_hosts().len(), 2);
        assert_eq!(c.ssl_mode(), "require");
        let c = ConnInfo::parse_with("sslmode=disable", &env).unwrap();
        assert_eq!(c.ssl_mode(), "disable");
    }

    #[test]
    fn mysql_sockets_go_without_tls() {
        assert_eq!(
            sqlx_mysql_url("mysql://root@localhost/db?socket=/run/mysqld.sock"),
            "mysql://root@localhost/db?socket=/run/mysqld.sock&ssl-mode=DISABLED"
        );
        let given = "mysql://root@localhost/db?socket=/s&ssl-mode=REQUIRED";
        assert_eq!(sqlx_mysql_url(given), given);
        let tcp = "mysql://app@db:3306/app";
        assert_eq!(sqlx_mysql_url(tcp), tcp);
    }

    #[test]
    fn no_tls_on_unix_sockets() {
        let c = ConnInfo::parse_with("host=/run/postgresql dbname=app sslmode=require", &no_env)
            .unwrap();
        assert_eq!(c.ssl_mode(), "disable");
        let c = ConnInfo::parse_with("host=db,/run/postgresql sslmode=require", &no_env).unwrap();
        assert_eq!(c.ssl_mode(), "require");
    }

    #[test]
    fn sqlx_urls_carry_the_resolved_settings() {
        let u = sqlx_postgres_url_with(
            "postgres://a@h/db?sslmode=require&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
            &no_env,
        )
        .unwrap();
        // libpq: require with a root certificate verifies the chain
        assert_eq!(
            u,
            "postgres://a@h/db?application_name=x&sslmode=verify-ca&sslrootcert=/etc/ca.pem"
        );
        let u = sqlx_postgres_url_with("postgres://a@h/db?sslrootcert=system", &no_env).unwrap();
        assert_eq!(u, "postgres://a@h/db?sslmode=verify-full");
        let env = |k: &str| (k == "PGSSLROOTCERT").then(|| "system".to_owned());
        assert!(sqlx_postgres_url_with("postgres://a@h/db", &env).is_err());
        let prefer =
            sqlx_postgres_url_with("postgres://a@h/db?application_name=x", &no_env).unwrap();
        assert_eq!(
            sqlx_postgres_plain(&prefer).as_deref(),
            Some("postgres://a@h/db?application_name=x&sslmode=disable")
        );
        assert_eq!(
            sqlx_postgres_plain("postgres://a@h/db?sslmode=require"),
            None
        );
    }
}
