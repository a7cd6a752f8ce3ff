//! The shoal store: a key-value store in a shared-memory segment that many
//! processes attach at once. It knows nothing of sockets or protocols; the
//! server and any embedding program call the same API.
//!
//! ```
//! use store::{Location, OpenOptions, SetOptions, Store};
//!
//! let path = std::env::temp_dir().join(format!("shoal-doc-{}", std::process::id()));
//! let store = Store::open(&OpenOptions {
//!     location: Location::Path(path.clone()),
//!     size: 8 << 20,
//!     ..OpenOptions::default()
//! })?;
//! let mut h = store.handle()?;
//! h.set(0, b"greeting", b"hello", &SetOptions::default())?;
//! assert_eq!(h.get(0, b"greeting")?, Some(b"hello".to_vec()));
//! assert_eq!(h.incr_by(0, b"n", 5)?, 5);
//! # std::fs::remove_file(path).unwrap();
//! # Ok::<(), store::Error>(())
//! ```
//!
//! How it stays correct with processes dying at any instruction is written
//! down in `docs/design.md`; code comments cite its invariants as I1, I2, …
//!
//! The folders are its layers, lowest first: `segment/` (the mapped bytes,
//! their layout, per-process contexts with undo logs, locks and recovery,
//! the allocator), `keyspace/` (the hash index, entries, the db map, the
//! handle's key and string operations, expiry and eviction), `collections/`
//! (lists, hashes, sets, sorted sets: compact or paged trees), `log/` (the
//! log ring and its records), and `ipc/` (what worker processes share
//! besides keys: the registry, mailboxes, pub/sub tables, the waiter table,
//! the key log).
#![deny(missing_docs)]
// Only the lowest layer, `segment/shm.rs`, may allow unsafe code (I1).
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod collections;
mod error;
mod ipc;
mod keyspace;
pub mod log;
mod segment;
mod store;
#[doc(hidden)]
pub mod testing;

pub use collections::paged::LazyFreePolicy;
pub use collections::{
    Collection, FieldValue, Hash, List, NodeLimits, Pending, Scored, Set, Stream, StreamConsumer,
    StreamEntry, StreamGroup, StreamId, StreamMeta, Trim, ZSet, HASH_LISTPACK_ENTRIES_WORD,
    HASH_LISTPACK_VALUE_WORD,
};
pub use error::{Error, Result};
pub use ipc::keylog::{KeyEvent, KeyLogEntry};
pub use ipc::mailbox::{Message, Sent};
pub use ipc::pubsub::{PatternSub, Receivers, SubKind};
pub use ipc::waiters::{waiter_queue, waiter_word};
pub use ipc::workers::{WorkerCounter, WorkerInfo, WorkerState};
pub use keyspace::entry::{Meta, ValueType};
pub use keyspace::evict::{EvictionPolicy, Sweep};
pub use keyspace::glob;
pub use keyspace::handle::Handle;
pub use keyspace::keys::{ExpireCondition, ScanPage, Ttl};
pub use keyspace::lfu::{DEFAULT_LFU_DECAY_TIME, DEFAULT_LFU_LOG_FACTOR, LFU_INIT_VAL};
pub use keyspace::restore::RestoreOptions;
pub use keyspace::strings::{
    parse_i64, resolve_range, Expiry, Modify, SetCondition, SetOptions, SetResult, Update,
};
pub use segment::alloc::ArenaStats;
pub use segment::context::{Stat, STATS, STAT_COUNT};
pub use segment::layout::{
    CONFIG_TEXT_MAX, CONFIG_WORDS, DEFAULT_CONTEXTS, LAYOUT_VERSION, MAX_VALUE_LEN, MAX_WORKERS,
    NUM_DBS, WAITER_WORDS,
};
pub use segment::{parse_size, Clock, Location, OpenOptions, MIN_SEGMENT};
pub use store::{CheckReport, Store, StoreInfo};
