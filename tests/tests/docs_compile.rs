//! Every Rust block of README.md and docs/*.md compiles against the crate as
//! it is (gathered by `build.rs`; compiled, never run).

#[allow(dead_code)]
mod prelude {
    pub use futures_util::FutureExt;
    pub use serde::Deserialize;
    pub use settle::tokio_postgres::Config;
    pub use settle::*;
    pub use std::time::Duration;

    /// What the documents' handlers receive.
    #[derive(Deserialize)]
    pub struct Email {
        pub to: String,
    }

    #[derive(Deserialize)]
    pub struct Job {
        pub id: u64,
    }

    pub async fn send(_: &Email) -> std::result::Result<(), ()> {
        Ok(())
    }

    pub async fn handle(_: Job) -> std::result::Result<(), ()> {
        Ok(())
    }

    /// The future a service stops on (a signal, say): never, here.
    #[derive(Clone, Copy)]
    pub struct Shutdown;

    impl std::future::Future for Shutdown {
        type Output = ();
        fn poll(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            std::task::Poll::Pending
        }
    }

    #[allow(non_upper_case_globals)]
    pub const shutdown_signal: Shutdown = Shutdown;
}

include!(concat!(env!("OUT_DIR"), "/doc_blocks.rs"));

#[test]
#[allow(clippy::assertions_on_constants)]
fn every_rust_block_of_the_docs_compiles() {
    // compiled above; this says the build script found the blocks
    assert!(
        BLOCKS >= 9,
        "{BLOCKS} Rust blocks found in README.md and docs/"
    );
}
