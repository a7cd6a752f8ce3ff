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
#![deny(missing_docs)]
// Only the lowest layer, `shm.rs`, may allow unsafe code (STYLE 1, I1).
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod alloc;
pub mod collections;
mod context;
mod dbmap;
mod entry;
mod error;
mod evict;
pub mod glob;
mod handle;
mod index;
mod keylog;
mod keys;
mod layout;
mod lfu;
pub mod log;
mod mailbox;
mod pubsub;
mod restore;
mod segment;
mod shm;
mod store;
mod strings;
#[doc(hidden)]
pub mod testing;
mod users;
mod waiters;
mod watch;
mod workers;

pub use alloc::ArenaStats;
pub use collections::{Collection, FieldValue, Hash, List, Scored, Set, ZSet};
pub use context::{Stat, STATS, STAT_COUNT};
pub use entry::{Meta, ValueType};
pub use error::{Error, Result};
pub use evict::{EvictionPolicy, Sweep};
pub use handle::Handle;
pub use keylog::{KeyEvent, KeyLogEntry};
pub use keys::{ExpireCondition, ScanPage, Ttl};
pub use layout::{
    CONFIG_TEXT_MAX, CONFIG_WORDS, DEFAULT_CONTEXTS, LAYOUT_VERSION, MAX_VALUE_LEN, MAX_WORKERS,
    NUM_DBS, WAITER_WORDS,
};
pub use lfu::{DEFAULT_LFU_DECAY_TIME, DEFAULT_LFU_LOG_FACTOR, LFU_INIT_VAL};
pub use mailbox::{Message, Sent};
pub use pubsub::{PatternSub, Receivers, SubKind};
pub use restore::RestoreOptions;
pub use segment::{parse_size, Clock, Location, OpenOptions, MIN_SEGMENT};
pub use store::{CheckReport, Store, StoreInfo};
pub use strings::{
    parse_i64, resolve_range, Expiry, Modify, SetCondition, SetOptions, SetResult, Update,
};
pub use waiters::waiter_word;
pub use workers::{WorkerCounter, WorkerInfo, WorkerState};
