//! TLS as libpq does it, over rustls: which `sslmode` checks what, where the
//! root and client certificates come from, and the rustls configuration
//! that carries it out.
//!
//! | sslmode | encrypted | server certificate |
//! |---|---|---|
//! | disable | no | — |
//! | allow, prefer (default) | when the server offers it | chain checked when a root certificate is at hand, else not |
//! | require | yes | the same |
//! | verify-ca | yes | chain checked against the root certificates |
//! | verify-full | yes | chain and host name checked |
//!
//! Root certificates: `sslrootcert` (a PEM file, or `system` for the
//! operating system's store, which makes verify-full the default and refuses
//! weaker modes), else `~/.postgresql/root.crt` when it exists. A client
//! certificate: `sslcert` and `sslkey`, else `~/.postgresql/postgresql.crt`
//! and `.key` when they exist.

use crate::error::{Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<SslMode> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(Error::invalid(format!(
                "sslmode {other:?}: use disable, allow, prefer, require, verify-ca or verify-full"
            )))
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where trusted root certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Roots {
    File(PathBuf),
    /// the operating system's store (`sslrootcert=system`)
    System,
}

/// The TLS settings as a connection string and the environment give them.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsGiven {
    pub mode: Option<String>,
    pub root: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

/// How far the server's certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

/// TLS settings with libpq's defaults and rules applied.
#[derive(Clone, Debug)]
pub(crate) struct TlsSettings {
    mode: SslMode,
    roots: Option<Roots>,
    /// a client certificate chain and its key
    client: Option<(PathBuf, PathBuf)>,
}

impl TlsSettings {
    /// Apply libpq's rules: `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and
    /// `PGSSLKEY` for what is not given, the files under `~/.postgresql/`
    /// for what neither gives, `sslrootcert=system` only with verify-full.
    pub(crate) fn resolve(given: TlsGiven, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let home = env("HOME").map(|h| Path::new(&h).join(".postgresql"));
        let default_file = |name: &str| home.as_ref().map(|d| d.join(name)).filter(|p| p.is_file());
        let root = given.root.or_else(|| env("PGSSLROOTCERT"));
        let roots = match root.as_deref() {
            Some("system") => Some(Roots::System),
            Some(f) => Some(Roots::File(PathBuf::from(f))),
            None => default_file("root.crt").map(Roots::File),
        };
        let mode = match given.mode.or_else(|| env("PGSSLMODE")) {
            Some(m) => SslMode::parse(&m)?,
            None if roots == Some(Roots::System) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if roots == Some(Roots::System) && mode != SslMode::VerifyFull && mode != SslMode::Disable {
            return Err(Error::invalid(format!(
                "sslmode={} may not be used with sslrootcert=system: use verify-full",
                mode.name()
            )));
        }
        if mode >= SslMode::VerifyCa && roots.is_none() {
            let expected = home
                .map(|d| d.join("root.crt").display().to_string())
                .unwrap_or_else(|| "~/.postgresql/root.crt".into());
            return Err(Error::invalid(format!(
                "sslmode={} checks the server's certificate, but the root certificate file \
                 \"{expected}\" does not exist: give one with sslrootcert=FILE, use the system's \
                 trusted roots with sslrootcert=system, or use sslmode=require to encrypt without \
                 checking",
                mode.name()
            )));
        }
        let cert = given
            .cert
            .or_else(|| env("PGSSLCERT"))
            .map(PathBuf::from)
            .or_else(|| default_file("postgresql.crt"));
        let key = given
            .key
            .or_else(|| env("PGSSLKEY"))
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|d| d.join("postgresql.key")));
        // libpq sends a client certificate only when its file exists
        let client = match cert {
            Some(c) if c.is_file() => {
                let key = key.ok_or_else(|| {
                    Error::invalid(format!(
                        "client certificate {} has no key: give sslkey",
                        c.display()
                    ))
                })?;
                Some((c, key))
            }
            _ => None,
        };
        Ok(TlsSettings {
            mode,
            roots,
            client,
        })
    }

    /// The same settings without TLS (a Unix-domain socket).
    pub(crate) fn disabled(self) -> TlsSettings {
        TlsSettings {
            mode: SslMode::Disable,
            ..self
        }
    }

    pub(crate) fn mode_name(&self) -> &'static str {
        self.mode.name()
    }

    /// tokio-postgres's sslmode: whether TLS is tried and required.
    pub(crate) fn tokio_mode(&self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as T;
        match self.mode {
            SslMode::Disable => T::Disable,
            SslMode::Allow | SslMode::Prefer => T::Prefer,
            _ => T::Require,
        }
    }

    /// sqlx's sslmode for these settings: require with a root certificate
    /// checks the chain, as in libpq.
    pub(crate) fn sqlx_mode(&self) -> &'static str {
        match self.check() {
            Check::ChainAndName => "verify-full",
            Check::Chain if self.mode >= SslMode::Require => "verify-ca",
            // sqlx's prefer does not check certificates
            _ => self.mode.name(),
        }
    }

    pub(crate) fn root_is_system(&self) -> bool {
        self.roots == Some(Roots::System)
    }

    pub(crate) fn root_file(&self) -> Option<&Path> {
        match &self.roots {
            Some(Roots::File(f)) => Some(f),
            _ => None,
        }
    }

    pub(crate) fn client_files(&self) -> Option<(&Path, &Path)> {
        self.client
            .as_ref()
            .map(|(c, k)| (c.as_path(), k.as_path()))
    }

    /// Whether connections may use TLS at all.
    pub(crate) fn enabled(&self) -> bool {
        self.mode != SslMode::Disable
    }

    fn check(&self) -> Check {
        match (self.mode, &self.roots) {
            (SslMode::VerifyFull, _) => Check::ChainAndName,
            (SslMode::Disable, _) | (_, None) => Check::Nothing,
            _ => Check::Chain,
        }
    }

    /// The rustls configuration that checks what these settings say.
    pub(crate) fn rustls_config(&self) -> Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::invalid(format!("TLS: {e}")))?;
        let verifier: Arc<dyn ServerCertVerifier> = match self.check() {
            Check::Nothing => Arc::new(AnyCertificate(provider)),
            check => {
                let roots = Arc::new(self.root_store()?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| Error::invalid(format!("TLS: {e}")))?;
                if check == Check::Chain {
                    Arc::new(ChainOnly(webpki))
                } else {
                    webpki
                }
            }
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|i| i.collect::<std::result::Result<Vec<_>, _>>())
                    .map_err(|e| file_error("client certificate", cert, e))?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| file_error("client key", key, e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| Error::invalid(format!("TLS client certificate: {e}")))?
            }
        };
        config.enable_sni = true;
        Ok(config)
    }

    fn root_store(&self) -> Result<RootCertStore> {
        let mut store = RootCertStore::empty();
        match &self.roots {
            Some(Roots::File(f)) => {
                let certs = CertificateDer::pem_file_iter(f)
                    .and_then(|i| i.collect::<std::result::Result<Vec<_>, _>>())
                    .map_err(|e| file_error("root certificate", f, e))?;
                let (added, _) = store.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(Error::invalid(format!(
                        "root certificate file {} holds no certificate",
                        f.display()
                    )));
                }
            }
            Some(Roots::System) => {
                let found = rustls_native_certs::load_native_certs();
                store.add_parsable_certificates(found.certs);
                if store.is_empty() {
                    return Err(Error::invalid(
                        "sslrootcert=system: the operating system's certificate store is empty",
                    ));
                }
            }
            None => {}
        }
        Ok(store)
    }
}

fn file_error(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "could not read {what} file {}: {e}",
        path.display()
    ))
}

/// verify-ca: the chain to a trusted root is checked, the host name is not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain first and the name last: a name error
        // means the chain was good
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// prefer and require without a root certificate: encrypted, the
/// certificate taken as it comes (the handshake's signatures are still
/// checked, so the peer holds the certificate's key).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
            .or_else(|_| signed_with_key_of(cert, message, dss, algs))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
            .or_else(|_| signed_with_key_of(cert, message, dss, algs))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Whether `dss` is a signature of `message` by the key of `cert`, read
/// whatever the certificate's X.509 version: webpki reads version 3 only,
/// and Citus makes itself a version 1 certificate, which libpq takes.
fn signed_with_key_of(
    cert: &CertificateDer<'_>,
    message: &[u8],
    dss: &DigitallySignedStruct,
    algs: &rustls::crypto::WebPkiSupportedAlgorithms,
) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
    use x509_cert::der::Decode;
    let parsed = x509_cert::Certificate::from_der(cert.as_ref())
        .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
    let key = parsed
        .tbs_certificate
        .subject_public_key_info
        .subject_public_key
        .raw_bytes();
    let candidates = algs
        .mapping
        .iter()
        .find(|(scheme, _)| *scheme == dss.scheme)
        .map_or(&[][..], |(_, a)| *a);
    if candidates
        .iter()
        .any(|alg| alg.verify_signature(key, message, dss.signature()).is_ok())
    {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(rustls::Error::InvalidCertificate(
            CertificateError::BadSignature,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(mode: Option<&str>, root: Option<&str>) -> TlsGiven {
        TlsGiven {
            mode: mode.map(str::to_owned),
            root: root.map(str::to_owned),
            ..TlsGiven::default()
        }
    }

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn libpq_rules() {
        let t = TlsSettings::resolve(given(None, None), &none).unwrap();
        assert_eq!((t.mode, t.check()), (SslMode::Prefer, Check::Nothing));
        let t = TlsSettings::resolve(given(Some("require"), Some("/ca.pem")), &none).unwrap();
        assert_eq!(t.check(), Check::Chain);
        assert_eq!(t.sqlx_mode(), "verify-ca");
        let t = TlsSettings::resolve(given(None, Some("system")), &none).unwrap();
        assert_eq!(
            (t.mode, t.check()),
            (SslMode::VerifyFull, Check::ChainAndName)
        );
        let e = TlsSettings::resolve(given(Some("require"), Some("system")), &none).unwrap_err();
        assert!(e.to_string().contains("verify-full"), "{e}");
        let e = TlsSettings::resolve(given(Some("verify-ca"), None), &none).unwrap_err();
        assert!(e.to_string().contains("root certificate file"), "{e}");
        assert!(TlsSettings::resolve(given(Some("verify_full"), None), &none).is_err());
        let env = |k: &str| (k == "PGSSLMODE").then(|| "disable".to_owned());
        let t = TlsSettings::resolve(given(None, None), &env).unwrap();
        assert!(!t.enabled());
    }
}
