//! A replica's relay (docs/replication.md, "Chained replicas"): the
//! primary's log frames a replica applied, kept in log files of the
//! primary's LSN space under `<dir>/relay/`, so that the replica can feed
//! replicas of its own with the top primary's positions (a sub-replica's
//! partial resync positions are the top primary's offsets, as Redis's
//! chained offsets are).
//!
//! The files have the log files' format (docs/persistence.md), so
//! `LogTail` reads them as it reads a primary's log. They are fsynced only
//! at the synchronous mode's disk level (`Relay::sync`, asked by the
//! primary): otherwise the relay only feeds live links, and a replica that
//! restarts starts a new relay where it resumes.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use log::file::{encode_file_header, list_logs, log_file_name, LOG_MAGIC};

/// A relay file is closed past this size and a new one started.
const FILE_LIMIT: u64 = 64 << 20;
/// Relay files kept (the oldest go first): how far behind a sub-replica
/// may fall and still resume partially.
const KEEP_FILES: usize = 4;

/// The relay being written.
pub struct Relay {
    dir: PathBuf,
    file: File,
    /// The current file's first LSN.
    file_first: u64,
    file_bytes: u64,
    end: u64,
    /// A file was created since the last `sync`: the directory is fsynced
    /// too, so that its name survives a crash.
    new_file: bool,
}

impl Relay {
    /// A new relay in `dir` starting at `lsn`: older relay files go.
    pub fn start(dir: &Path, lsn: u64) -> io::Result<Relay> {
        std::fs::create_dir_all(dir)?;
        for f in list_logs(dir)? {
            std::fs::remove_file(&f.path)?;
        }
        let file = new_file(dir, lsn)?;
        Ok(Relay {
            dir: dir.to_path_buf(),
            file,
            file_first: lsn,
            file_bytes: 0,
            end: lsn,
            new_file: true,
        })
    }

    /// Cuts the relay back to `lsn` (frames of a group the link lost
    /// before it closed), if the current file holds it; false otherwise.
    pub fn rewind(&mut self, lsn: u64) -> io::Result<bool> {
        if lsn < self.file_first || lsn > self.end {
            return Ok(false);
        }
        let bytes = lsn - self.file_first;
        self.file.set_len(log::file::FILE_HEADER as u64 + bytes)?;
        self.file.seek(SeekFrom::End(0))?;
        self.file_bytes = bytes;
        self.end = lsn;
        Ok(true)
    }

    /// The LSN after the last frame written.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Makes every frame written so far durable (one fsync covers them
    /// all); returns the end they reach.
    pub fn sync(&mut self) -> io::Result<u64> {
        self.file.sync_data()?;
        if self.new_file {
            File::open(&self.dir)?.sync_all()?;
            self.new_file = false;
        }
        Ok(self.end)
    }

    /// Appends whole, checked frames that start at `end()`.
    pub fn append(&mut self, frames: &[u8]) -> io::Result<()> {
        if self.file_bytes >= FILE_LIMIT {
            // A file closed with frames `sync` has not covered yet.
            self.file.sync_data()?;
            self.new_file = true;
            self.file = new_file(&self.dir, self.end)?;
            self.file_first = self.end;
            self.file_bytes = 0;
            let logs = list_logs(&self.dir)?;
            for old in logs.iter().take(logs.len().saturating_sub(KEEP_FILES)) {
                std::fs::remove_file(&old.path)?;
            }
        }
        self.file.write_all(frames)?;
        self.file_bytes += frames.len() as u64;
        self.end += frames.len() as u64;
        Ok(())
    }
}

fn new_file(dir: &Path, lsn: u64) -> io::Result<File> {
    let mut f = File::create(dir.join(log_file_name(lsn)))?;
    f.write_all(&encode_file_header(LOG_MAGIC, lsn))?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use log::LogTail;
    use store::log::encode_frame;

    #[test]
    fn a_relay_reads_back_from_any_frame_and_starts_over() {
        let dir = std::env::temp_dir().join(format!("shoal-relay-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut relay = Relay::start(&dir, 4096).unwrap();
        assert_eq!(relay.end(), 4096);
        let mut frames = Vec::new();
        encode_frame(4096, b"\x0fab", &mut frames);
        let second = 4096 + frames.len() as u64;
        encode_frame(second, b"\x0fcdef", &mut frames);
        relay.append(&frames).unwrap();
        assert_eq!(relay.end(), 4096 + frames.len() as u64);
        let mut out = Vec::new();
        let mut tail = LogTail::open(&dir, second).unwrap().unwrap();
        assert_eq!(
            tail.read(relay.end(), &mut out, 1 << 20).unwrap(),
            relay.end()
        );
        assert_eq!(out, frames[(second - 4096) as usize..]);
        assert!(relay.rewind(second).unwrap());
        assert!(!relay.rewind(4000).unwrap());
        relay.append(&frames[(second - 4096) as usize..]).unwrap();
        let mut again = Vec::new();
        let mut tail = LogTail::open(&dir, 4096).unwrap().unwrap();
        tail.read(relay.end(), &mut again, 1 << 20).unwrap();
        assert_eq!(again, frames);
        assert_eq!(relay.sync().unwrap(), relay.end());
        let relay = Relay::start(&dir, 8192).unwrap();
        assert_eq!(list_logs(&dir).unwrap().len(), 1);
        assert!(LogTail::open(&dir, second).unwrap().is_none());
        assert_eq!(relay.end(), 8192);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
