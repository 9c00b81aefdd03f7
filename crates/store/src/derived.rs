//! The slot an entry carries for what the store's users derive from its metadata, shared
//! by the entry read from disk and its memory-tier copy (see `StoredEntry::derived`). A
//! leaf of its own, so that `read` and `memory`, which both hold one, need not import
//! each other for it.

use std::any::Any;
use std::sync::{Arc, OnceLock};

/// A slot for one value derived from an entry's metadata, computed at most once per
/// copy of the entry (type-erased: the store does not know what its users derive).
pub(super) type Derived = Arc<OnceLock<Arc<dyn Any + Send + Sync>>>;
