//! The one TLS crypto provider both sides use: the client listener (`server::tls`) and the
//! connections to an `https://` origin (`origin::tls`). A leaf of its own, so that the
//! origin client, below the server, need not reach up into it for this.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The crypto provider of both TLS sides: ring (see `Cargo.toml`), named explicitly rather
/// than installed process-wide, so no other crate's choice can change it.
pub(crate) fn tls_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
