//! Reading the log files from any LSN on, as a replication sender does
//! (docs/replication.md): every frame is checked (LSN, length, CRC) before
//! it leaves, and reading crosses from one file to the next.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::file::{list_logs, FILE_HEADER};
use crate::stream::{FrameStream, Next};

/// Frames of a directory's log files from a position on.
pub struct LogTail {
    dir: PathBuf,
    /// The file being read, its first LSN and its stream from `pos`.
    current: Option<(u64, FrameStream<File>)>,
    pos: u64,
}

impl LogTail {
    /// A reader from `lsn`, if a log file of `dir` holds it (or `lsn` is
    /// the end of the newest file). None when the files start after it.
    pub fn open(dir: &Path, lsn: u64) -> io::Result<Option<LogTail>> {
        let logs = list_logs(dir)?;
        if logs.first().is_none_or(|f| f.lsn > lsn) {
            return Ok(None);
        }
        let mut tail = LogTail {
            dir: dir.to_path_buf(),
            current: None,
            pos: lsn,
        };
        let Some(file) = logs.iter().rev().find(|f| f.lsn <= lsn) else {
            return Ok(None);
        };
        let len = std::fs::metadata(&file.path)?.len();
        if FILE_HEADER as u64 + (lsn - file.lsn) > len {
            return Ok(None);
        }
        tail.open_file(&file.path, file.lsn)?;
        Ok(Some(tail))
    }

    fn open_file(&mut self, path: &Path, first: u64) -> io::Result<()> {
        let mut f = File::open(path)?;
        let at = FILE_HEADER as u64 + (self.pos - first);
        f.seek(SeekFrom::Start(at))?;
        self.current = Some((first, FrameStream::new(f, at, u64::MAX, None)));
        Ok(())
    }

    /// The LSN the next frame carries.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Appends whole, checked frames from the position up to `upto` (an
    /// LSN every byte before which is in the files), about `max` bytes at
    /// most. Returns the new position. A damaged frame is an error.
    pub fn read(&mut self, upto: u64, out: &mut Vec<u8>, max: usize) -> io::Result<u64> {
        let start = out.len();
        while self.pos < upto && out.len() - start < max {
            let Some((first, stream)) = self.current.as_mut() else {
                break;
            };
            let first = *first;
            match stream.next(Some(self.pos))? {
                Next::Frame {
                    header,
                    payload,
                    size,
                    ..
                } => {
                    store::log::encode_frame(header.lsn, payload, out);
                    self.pos += size;
                }
                Next::End | Next::Bad { .. } => {
                    // This file ends here: the next one must start at the
                    // position (files are contiguous).
                    let logs = list_logs(&self.dir)?;
                    match logs.iter().find(|f| f.lsn > first) {
                        Some(next) if next.lsn == self.pos => {
                            let path = next.path.clone();
                            self.open_file(&path, next.lsn)?;
                        }
                        _ => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!(
                                    "the log files have no valid frame at LSN {} (below the written end {upto})",
                                    self.pos
                                ),
                            ))
                        }
                    }
                }
            }
        }
        Ok(self.pos)
    }
}
