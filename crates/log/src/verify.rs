//! Checking a log file frame by frame (like kdb+'s `-11!(-2;log)`): how many
//! records are valid, how long the valid prefix is, and what stops it.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

use store::log::record::RecordError;
use store::log::{FrameError, Record};

use crate::error::{Error, ErrorKind};
use crate::file::{decode_file_header, parse_log_name, FILE_HEADER, LOG_MAGIC};
use crate::stream::{FrameStream, Next};

/// What is wrong at a [`Problem`]'s offset.
#[derive(Clone, Debug, PartialEq)]
pub enum ProblemKind {
    /// The file header is damaged, or disagrees with the file's name.
    Header(String),
    /// The bytes there are not a valid frame.
    Frame(FrameError),
    /// The frame is valid but its payload is not a record.
    Record(RecordError),
    /// A snapshot has no trailer: it was truncated or never finished.
    NoTrailer,
    /// A snapshot's trailer is malformed or disagrees with the frames.
    BadTrailer(String),
    /// A snapshot's whole-file checksum does not match.
    BadChecksum {
        /// The checksum in the trailer.
        stored: u32,
        /// The checksum of the file's bytes.
        computed: u32,
    },
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProblemKind::Header(msg) => f.write_str(msg),
            ProblemKind::Frame(e) => write!(f, "{e}"),
            ProblemKind::Record(e) => write!(f, "{e}"),
            ProblemKind::NoTrailer => {
                f.write_str("no trailer: the snapshot is truncated or was never finished")
            }
            ProblemKind::BadTrailer(msg) => write!(f, "bad trailer: {msg}"),
            ProblemKind::BadChecksum { stored, computed } => write!(
                f,
                "file checksum mismatch (trailer says {stored:#010x}, bytes give {computed:#010x})"
            ),
        }
    }
}

/// The first thing wrong in a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// Byte offset in the file.
    pub offset: u64,
    /// The LSN a frame there would have (for a log file; the last frame's for
    /// a snapshot's trailer problems).
    pub lsn: u64,
    /// What is wrong.
    pub what: ProblemKind,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "at byte {} (LSN {}): {}",
            self.offset, self.lsn, self.what
        )
    }
}

/// What [`verify_log`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct LogReport {
    /// The first LSN (from the header; from the name if the header is bad).
    pub first_lsn: u64,
    /// Valid frames.
    pub records: u64,
    /// Length of the valid prefix in bytes, header included (0 if the header
    /// is bad).
    pub valid_bytes: u64,
    /// Length of the file.
    pub file_bytes: u64,
    /// The LSN after the last valid frame.
    pub end_lsn: u64,
    /// The valid prefix ends inside a group that began at this LSN.
    pub open_group_at: Option<u64>,
    /// The first invalid bytes, if the valid prefix ends before the file does.
    pub problem: Option<Problem>,
}

impl LogReport {
    /// The whole file is valid.
    pub fn is_valid(&self) -> bool {
        self.problem.is_none()
    }

    /// The length [`truncate_log`] cuts the file to: the valid prefix, less an
    /// unfinished group at its end.
    pub fn truncated_len(&self) -> u64 {
        match self.open_group_at {
            Some(lsn) => FILE_HEADER as u64 + (lsn - self.first_lsn),
            None => self.valid_bytes,
        }
    }

    /// The header is damaged: no frame of the file can be trusted.
    pub fn header_bad(&self) -> bool {
        matches!(
            self.problem,
            Some(Problem {
                what: ProblemKind::Header(_),
                ..
            })
        )
    }
}

/// One valid frame of a log file, as [`scan_log`] hands it over.
pub(crate) struct Scanned<'a> {
    pub lsn: u64,
    pub offset: u64,
    pub size: u64,
    pub payload: &'a [u8],
    pub record: &'a Record<'a>,
    /// The next frame belongs to the same group. A `Pad` may continue one
    /// too: the voided frames of a write inside an exclusive section, which
    /// must not close the section's group (its end, or the `Pad` that drops
    /// it, comes later).
    pub continues: bool,
}

/// Reads the file header; a problem if it is short, damaged, or disagrees
/// with the name.
fn read_header(path: &Path, file: &mut File, file_bytes: u64) -> io::Result<Result<u64, String>> {
    let mut head = [0u8; FILE_HEADER];
    let n = (file_bytes.min(FILE_HEADER as u64)) as usize;
    file.read_exact(&mut head[..n])?;
    let first_lsn = match decode_file_header(LOG_MAGIC, &head[..n]) {
        Ok(lsn) => lsn,
        Err(msg) => return Ok(Err(msg)),
    };
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_log_name);
    match named {
        Some(named) if named != first_lsn => Ok(Err(format!(
            "the header's first LSN {first_lsn} disagrees with the file name's {named}"
        ))),
        _ => Ok(Ok(first_lsn)),
    }
}

/// Walks a log file's frames, calling `visit` for each valid one, and reports
/// where the valid prefix ends. Records are decoded too: a frame whose
/// payload is not a record ends the valid prefix.
pub(crate) fn scan_log(
    path: &Path,
    visit: &mut dyn FnMut(&Scanned<'_>) -> Result<(), Error>,
) -> Result<LogReport, Error> {
    let io_err = |e| Error::io(path, e);
    let mut file = File::open(path).map_err(io_err)?;
    let file_bytes = file.metadata().map_err(io_err)?.len();
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_log_name)
        .unwrap_or(0);
    let mut report = LogReport {
        first_lsn: named,
        records: 0,
        valid_bytes: 0,
        file_bytes,
        end_lsn: named,
        open_group_at: None,
        problem: None,
    };
    let first_lsn = match read_header(path, &mut file, file_bytes).map_err(io_err)? {
        Ok(lsn) => lsn,
        Err(msg) => {
            report.problem = Some(Problem {
                offset: 0,
                lsn: named,
                what: ProblemKind::Header(msg),
            });
            return Ok(report);
        }
    };
    report.first_lsn = first_lsn;
    report.end_lsn = first_lsn;
    report.valid_bytes = FILE_HEADER as u64;
    let region = file_bytes - FILE_HEADER as u64;
    let mut stream = FrameStream::new(file, FILE_HEADER as u64, region, None);
    loop {
        let lsn = report.end_lsn;
        match stream.next(Some(lsn)).map_err(io_err)? {
            Next::End => break,
            Next::Bad { offset, error } => {
                report.problem = Some(Problem {
                    offset,
                    lsn,
                    what: ProblemKind::Frame(error),
                });
                break;
            }
            Next::Frame {
                offset,
                payload,
                size,
                ..
            } => {
                let (record, continues) = match Record::decode(payload) {
                    Ok(decoded) => decoded,
                    Err(e) => {
                        report.problem = Some(Problem {
                            offset,
                            lsn,
                            what: ProblemKind::Record(e),
                        });
                        break;
                    }
                };
                visit(&Scanned {
                    lsn,
                    offset,
                    size,
                    payload,
                    record: &record,
                    continues,
                })?;
                if !continues {
                    report.open_group_at = None;
                } else if report.open_group_at.is_none() {
                    report.open_group_at = Some(lsn);
                }
                report.records += 1;
                report.valid_bytes += size;
                report.end_lsn += size;
            }
        }
    }
    Ok(report)
}

/// Checks a log file: header, then every frame (LSN chain, length, checksum,
/// padding) and record. Streams the file.
pub fn verify_log(path: &Path) -> io::Result<LogReport> {
    scan_log(path, &mut |_| Ok(())).map_err(Error::into_io)
}

/// Cuts a log file to its valid prefix, less an unfinished group at its end
/// (a torn tail: never acknowledged), and fsyncs it. `report` must come from
/// [`verify_log`] on the file as it is now. Returns the new length.
pub fn truncate_log(path: &Path, report: &LogReport) -> io::Result<u64> {
    if report.header_bad() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: the file header is damaged; truncation cannot repair it",
                path.display()
            ),
        ));
    }
    cut_file(path, report.file_bytes, report.truncated_len())
}

/// Cuts `path` (which must still be `expect_len` bytes long) to `len` bytes
/// and fsyncs it.
pub(crate) fn cut_file(path: &Path, expect_len: u64, len: u64) -> io::Result<u64> {
    let file = OpenOptions::new().write(true).open(path)?;
    let now = file.metadata()?.len();
    if now != expect_len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: the file is {now} bytes, not the {expect_len} that were verified; verify it again",
                path.display()
            ),
        ));
    }
    file.set_len(len)?;
    file.sync_all()?;
    Ok(len)
}

/// Turns a report's problem into the error recovery stops with.
pub(crate) fn corrupt(path: &Path, problem: &Problem, tail_repairable: bool) -> Error {
    Error::new(
        path,
        Some(problem.offset),
        ErrorKind::Corrupt {
            what: format!("LSN {}: {}", problem.lsn, problem.what),
            tail_repairable,
        },
    )
}
