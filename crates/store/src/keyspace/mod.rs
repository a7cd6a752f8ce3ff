//! The keyspace: the hash index of every db, entries and their metadata,
//! the db map (SWAPDB), the [`Handle`](handle::Handle) with its key and
//! string operations, expiry, eviction (LRU/LFU) and WATCH versions.

pub(crate) mod dbmap;
pub(crate) mod entry;
pub(crate) mod evict;
pub mod glob;
pub(crate) mod handle;
pub(crate) mod index;
pub(crate) mod keys;
pub(crate) mod lfu;
pub(crate) mod restore;
pub(crate) mod strings;
pub(crate) mod watch;
