//! The shoal transaction log's files (docs/persistence.md): the log writer that
//! drains the ring in shared memory to segmented log files, fuzzy snapshots,
//! startup recovery, and verification and dumps for operators.
//!
//! The frame and record formats live in the store (`store::log`), since the
//! ring in shared memory holds the same bytes as the files. This crate never
//! touches shared memory: the store side plugs in through [`LogSource`] and
//! [`SnapshotSource`].
//!
//! ```
//! use std::io;
//! use log::{recover, write_snapshot, verify_snapshot, Phase, SnapshotSource};
//! use store::log::record::encode_delete;
//!
//! /// A store with one entry, at LSN 40.
//! struct OneEntry;
//! impl SnapshotSource for OneEntry {
//!     fn start_lsn(&mut self) -> u64 { 64 }
//!     fn for_each(&mut self, f: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>) -> io::Result<()> {
//!         let mut payload = Vec::new();
//!         encode_delete(&mut payload, 0, b"gone");
//!         f(40, &payload)
//!     }
//!     fn end_lsn(&mut self) -> u64 { 64 }
//! }
//!
//! let dir = std::env::temp_dir().join(format!("shoal-log-doc-{}", std::process::id()));
//! let info = write_snapshot(&dir, &mut OneEntry)?;
//! assert!(verify_snapshot(&info.path)?.is_valid());
//! let mut seen = Vec::new();
//! let summary = recover(&dir, &mut |phase, lsn, _| { seen.push((phase, lsn)); Ok(()) }, &mut |_| {})
//!     .map_err(log::Error::into_io)?;
//! assert_eq!(seen, [(Phase::Snapshot, 40)]);
//! assert_eq!(summary.end_lsn, 64);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), io::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod dump;
mod error;
pub mod file;
mod recovery;
mod snapshot;
mod stream;
mod tail;
mod verify;
mod writer;

pub use dump::{dump_log, dump_snapshot};
pub use error::{Error, ErrorKind};
pub use recovery::{recover, ApplyFn, Phase, Progress, RecoverySummary, SnapshotLoad};
pub use snapshot::{
    prune, prune_keeping, read_snapshot, verify_snapshot, write_snapshot, EntryFn, SnapshotInfo,
    SnapshotReport, SnapshotSource, TRAILER,
};
pub use tail::LogTail;
pub use verify::{truncate_log, verify_log, LogReport, Problem, ProblemKind};
pub use writer::{FsyncPolicy, LogSource, LogWriter, UnknownPolicy, WriterStatus};
