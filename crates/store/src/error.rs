//! The store's one error type. The server maps these to Redis/memcached error
//! strings in one place; this crate only says what went wrong.

use std::fmt;
use std::io;

/// Everything a store operation can fail with.
#[derive(Debug)]
pub enum Error {
    /// An I/O call failed while creating or attaching the segment.
    Io(String, io::Error),
    /// The segment cannot be attached; the message says why and what to do.
    Attach(String),
    /// A word in shared memory points outside the segment or breaks an invariant
    /// (the byte offset where it was found).
    Corrupted(u64),
    /// The value at the key is not of the type the operation needs.
    WrongType,
    /// The value is not an integer, or is out of range.
    NotInteger,
    /// An increment or decrement would overflow an i64.
    Overflow,
    /// No memory left and the eviction policy (`noeviction`) or the data forbids
    /// freeing any.
    OutOfMemory,
    /// The key does not exist (RENAME of a missing key).
    NoSuchKey,
    /// The result would exceed the largest value the store holds.
    TooLarge,
    /// Every context slot of the segment is taken by a live thread.
    NoContext,
    /// The database number is not in 0..16.
    BadDb,
    /// COPY or MOVE onto the very key it reads from.
    SameObject,
    /// A collection value's bytes do not decode (damaged in the segment).
    BadValue,
    /// The write's log record (bytes) is larger than the log ring takes
    /// (the limit): nothing was written.
    LogRecordTooLarge(u64, u64),
    /// The log is on but the process that writes its files (this pid) is
    /// gone, so a write waiting for ring space would wait forever: nothing
    /// was written.
    LogWriterGone(u64),
}

/// Result alias used across the store.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(what, e) => write!(f, "{what}: {e}"),
            Error::Attach(msg) => f.write_str(msg),
            Error::Corrupted(off) => write!(f, "segment corrupted at offset {off:#x}"),
            Error::WrongType => {
                f.write_str("Operation against a key holding the wrong kind of value")
            }
            Error::NotInteger => f.write_str("value is not an integer or out of range"),
            Error::Overflow => f.write_str("increment or decrement would overflow"),
            Error::OutOfMemory => {
                f.write_str("out of memory and the eviction policy forbids freeing any")
            }
            Error::NoSuchKey => f.write_str("no such key"),
            Error::TooLarge => f.write_str("string exceeds maximum allowed size"),
            Error::NoContext => f.write_str("every context slot of the segment is in use"),
            Error::BadDb => f.write_str("DB index is out of range"),
            Error::SameObject => f.write_str("source and destination objects are the same"),
            Error::BadValue => f.write_str("a collection value is damaged"),
            Error::LogRecordTooLarge(size, max) => write!(
                f,
                "the write's log record ({size} bytes) exceeds the log ring's limit of {max} bytes"
            ),
            Error::LogWriterGone(pid) => write!(
                f,
                "the log writer (pid {pid}) is gone: no write can be logged until the server restarts"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(_, e) => Some(e),
            _ => None,
        }
    }
}
