//! The server crate's one error type.

use std::fmt;
use std::io;

/// What can stop a supervisor or a worker.
#[derive(Debug)]
pub enum Error {
    /// The segment could not be created or attached.
    Store(store::Error),
    /// A system call failed; the text says what was being done.
    Io(String, io::Error),
    /// The configuration cannot work (e.g. the port is taken).
    Config(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Store(e) => write!(f, "{e}"),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
            Error::Config(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Store(e) => Some(e),
            Error::Io(_, e) => Some(e),
            Error::Config(_) => None,
        }
    }
}

impl From<store::Error> for Error {
    fn from(e: store::Error) -> Error {
        Error::Store(e)
    }
}

/// Wraps an I/O error with what was being done.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |e| Error::Io(what, e)
}
