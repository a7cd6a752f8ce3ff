//! The crate's one error type: which file, where in it, and what went wrong,
//! worded so an operator knows what to run next.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Why a log or snapshot operation failed.
#[derive(Debug)]
pub struct Error {
    /// The file (or directory) concerned.
    pub path: PathBuf,
    /// Byte offset in that file, or the LSN for [`ErrorKind::Ring`].
    pub offset: Option<u64>,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// What went wrong; see [`Error`].
#[derive(Debug)]
pub enum ErrorKind {
    /// An I/O call failed.
    Io(io::Error),
    /// The bytes at `offset` are not a valid log: `what` says how. When
    /// `tail_repairable`, everything from there on is a torn or corrupt tail
    /// that `shoal log verify --truncate` cuts; otherwise valid data follows
    /// (or the file header itself is damaged) and truncation is no repair.
    Corrupt {
        /// What is wrong there.
        what: String,
        /// Cutting the file at `offset` is the right repair.
        tail_repairable: bool,
    },
    /// The files disagree with each other or with the ring: a gap between log
    /// files, a log that starts after the data it needs, data the ring no
    /// longer holds.
    Inconsistent(String),
    /// A snapshot that recovery needs does not verify.
    BadSnapshot(String),
    /// The ring handed the writer bytes that are not the frames it promised.
    Ring(String),
    /// The caller's apply function refused a record.
    Apply(String),
}

impl Error {
    pub(crate) fn new(path: &Path, offset: Option<u64>, kind: ErrorKind) -> Error {
        Error {
            path: path.to_path_buf(),
            offset,
            kind,
        }
    }

    pub(crate) fn io(path: &Path, err: io::Error) -> Error {
        Error::new(path, None, ErrorKind::Io(err))
    }

    pub(crate) fn inconsistent(path: &Path, msg: impl Into<String>) -> Error {
        Error::new(path, None, ErrorKind::Inconsistent(msg.into()))
    }

    /// Converts to an `io::Error` carrying this error's message (for the
    /// functions whose signature is `io::Result`).
    pub fn into_io(self) -> io::Error {
        match self.kind {
            ErrorKind::Io(e) => io::Error::new(e.kind(), format!("{}: {e}", self.path.display())),
            _ => io::Error::new(io::ErrorKind::InvalidData, self.to_string()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        let at = |f: &mut fmt::Formatter<'_>| match self.offset {
            Some(off) => write!(f, " at byte {off}"),
            None => Ok(()),
        };
        match &self.kind {
            ErrorKind::Io(e) => {
                write!(f, "{path}")?;
                at(f)?;
                write!(f, ": {e}")
            }
            ErrorKind::Corrupt {
                what,
                tail_repairable: true,
            } => {
                write!(f, "{path}: torn or corrupt tail")?;
                at(f)?;
                write!(
                    f,
                    ": {what}; `shoal log verify --truncate {path}` cuts the file there"
                )
            }
            ErrorKind::Corrupt {
                what,
                tail_repairable: false,
            } => {
                write!(f, "{path} is damaged before its end")?;
                at(f)?;
                write!(
                    f,
                    ": {what}. Valid data follows it. Restore the file from a copy"
                )?;
                if self
                    .offset
                    .is_some_and(|off| off >= crate::file::FILE_HEADER as u64)
                {
                    write!(
                        f,
                        ", or recover up to that point (losing every later record): \
                         `shoal log verify --truncate {path}`, then move every later log \
                         file out of the directory"
                    )
                } else {
                    write!(
                        f,
                        ", or move it and every later log file out of the directory to \
                         recover up to it"
                    )
                }
            }
            ErrorKind::Inconsistent(msg) => write!(f, "{path}: {msg}"),
            ErrorKind::BadSnapshot(msg) => write!(
                f,
                "{path}: {msg} (`shoal snapshot verify {path}` shows what is wrong)"
            ),
            ErrorKind::Ring(msg) => {
                write!(f, "log ring")?;
                if let Some(lsn) = self.offset {
                    write!(f, " at LSN {lsn}")?;
                }
                write!(f, " (writing {path}): {msg}")
            }
            ErrorKind::Apply(msg) => {
                write!(f, "{path}")?;
                at(f)?;
                write!(f, ": cannot apply record: {msg}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}
