//! The dashboard's gate: its token on every request, and the headers every
//! response carries.

use super::App;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

const COOKIE: &str = "settle_token";

/// Equal, in time that does not depend on where they differ.
pub fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn random_hex(bytes: usize) -> Result<String, String> {
    let mut b = vec![0u8; bytes];
    getrandom::fill(&mut b).map_err(|e| format!("no randomness for the CSRF token: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn query_token(req: &Request) -> Option<String> {
    req.uri().query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == "token").then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(&s.replace('+', " "))
        .decode_utf8_lossy()
        .into_owned()
}

fn cookie_token(req: &Request) -> Option<String> {
    req.headers().get_all(header::COOKIE).iter().find_map(|v| {
        v.to_str().ok()?.split(';').find_map(|c| {
            let (k, v) = c.trim().split_once('=')?;
            (k == COOKIE).then(|| v.to_owned())
        })
    })
}

fn bearer_token(req: &Request) -> Option<String> {
    let v = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    v.strip_prefix("Bearer ").map(|t| t.trim().to_owned())
}

/// A token that can travel in a header, a cookie and a query unchanged (no
/// `+`: a query reads it as a space).
pub fn check_token(t: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-._~/=".contains(c);
    if t.len() < 16 || !t.chars().all(ok) {
        return Err("the dashboard token needs 16 or more letters, digits or -._~/= (e.g. openssl rand -hex 24)".into());
    }
    Ok(())
}

/// Whether a request's Host names this machine's loopback: without a token
/// that is the only way in, so a page of another site whose name was made to
/// resolve to 127.0.0.1 (DNS rebinding) cannot read or drive the dashboard.
fn loopback_host(req: &Request) -> bool {
    let Some(h) = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        return false;
    };
    let name = match h.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => h.rsplit_once(':').map_or(h, |(n, _)| n),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Let a request through when the dashboard has no token (and the request
/// names a loopback host) or the request carries it; `?token=` is traded for
/// an HttpOnly cookie and a redirect to the same page without it (so it
/// leaves the address bar and history).
pub async fn require_token(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let Some(want) = app.token.as_deref() else {
        if loopback_host(&req) {
            return next.run(req).await;
        }
        return (
            StatusCode::MISDIRECTED_REQUEST,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "421 Misdirected Request: a settle dashboard without a token answers only to localhost, 127.0.0.1 or [::1]\n",
        )
            .into_response();
    };
    if bearer_token(&req)
        .or_else(|| cookie_token(&req))
        .is_some_and(|t| same(&t, want))
    {
        return next.run(req).await;
    }
    if query_token(&req).is_some_and(|t| same(&t, want)) {
        let cookie = format!("{COOKIE}={want}; HttpOnly; SameSite=Strict; Path=/");
        let to = req.uri().path().to_owned();
        return (
            StatusCode::SEE_OTHER,
            [
                (
                    header::SET_COOKIE,
                    HeaderValue::from_str(&cookie).unwrap_or(HeaderValue::from_static("")),
                ),
                (
                    header::LOCATION,
                    HeaderValue::from_str(&to).unwrap_or(HeaderValue::from_static("/")),
                ),
            ],
        )
            .into_response();
    }
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Bearer"),
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
        ],
        "401 Unauthorized: this settle dashboard needs its token (Authorization: Bearer <token>, or open it once with ?token=<token>)\n",
    )
        .into_response()
}

/// No script but the dashboard's own file, no framing, no caching, no
/// referrer (which could carry `?token=`).
pub async fn security_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd") && !same("abc", "ab") && !same("", "a"));
        assert_eq!(percent_decode("a%20b+c%2"), "a b c%2");
        assert_eq!(random_hex(16).unwrap().len(), 32);
        assert!(check_token("0123456789abcdef-_.~/=").is_ok());
        for bad in [
            "short",
            "0123456789abcdef+x",
            "0123456789abcdef;x",
            "0123456789abcdef x",
            "0123456789abcdéf0",
        ] {
            assert!(check_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loopback_hosts() {
        let host = |h: &str| {
            let r = Request::builder()
                .header(header::HOST, h)
                .body(axum::body::Body::empty())
                .unwrap();
            loopback_host(&r)
        };
        for h in [
            "127.0.0.1:7433",
            "localhost:7433",
            "LOCALHOST",
            "[::1]:7433",
            "127.0.0.2",
        ] {
            assert!(host(h), "{h}");
        }
        for h in [
            "evil.example:7433",
            "10.0.0.1:7433",
            "localhost.evil.example",
            "[::2]:1",
        ] {
            assert!(!host(h), "{h}");
        }
    }
}
