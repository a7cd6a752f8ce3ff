//! File headers, names and directory listings shared by log files and
//! snapshots.
//!
//! ```text
//! +0  8 bytes  magic "SHOALLOG" (log) or "SHOALSNP" (snapshot)
//! +8  u32 LE   format version (1)
//! +12 u32      0
//! +16 u64 LE   first LSN (log) or start LSN (snapshot)
//! +24 u32 LE   CRC32C of bytes [0..24)
//! +28 u32      0
//! ```

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// Bytes of a log or snapshot file header (and of a snapshot trailer).
pub const FILE_HEADER: usize = 32;
/// Magic of a log file.
pub const LOG_MAGIC: &[u8; 8] = b"SHOALLOG";
/// Magic of a snapshot file.
pub const SNAPSHOT_MAGIC: &[u8; 8] = b"SHOALSNP";
/// Magic of a snapshot's trailer.
pub const TRAILER_MAGIC: &[u8; 8] = b"SHOALEND";
/// The file format version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 1;

const LOG_PREFIX: &str = "log-";
const LOG_SUFFIX: &str = ".shlog";
const SNAPSHOT_PREFIX: &str = "snapshot-";
const SNAPSHOT_SUFFIX: &str = ".shsnap";
const TMP_SUFFIX: &str = ".tmp";

/// The header of a file whose first LSN is `lsn`.
pub fn encode_file_header(magic: &[u8; 8], lsn: u64) -> [u8; FILE_HEADER] {
    let mut h = [0u8; FILE_HEADER];
    h[..8].copy_from_slice(magic);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&lsn.to_le_bytes());
    let crc = crc32c::crc32c(&h[..24]);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Checks a file header and returns its LSN; the error says what is wrong.
pub fn decode_file_header(magic: &[u8; 8], bytes: &[u8]) -> Result<u64, String> {
    if bytes.len() < FILE_HEADER {
        return Err(format!(
            "file header truncated ({} of {FILE_HEADER} bytes)",
            bytes.len()
        ));
    }
    if &bytes[..8] != magic {
        return Err(format!(
            "bad magic {:?} (a {} file starts with {:?})",
            String::from_utf8_lossy(&bytes[..8]),
            if magic == LOG_MAGIC {
                "log"
            } else {
                "snapshot"
            },
            String::from_utf8_lossy(magic)
        ));
    }
    if crc32c::crc32c(&bytes[..24]) != u32_at(bytes, 24) {
        return Err("file header checksum mismatch".into());
    }
    let version = u32_at(bytes, 8);
    if version != FORMAT_VERSION {
        return Err(format!(
            "format version {version} (this build reads {FORMAT_VERSION})"
        ));
    }
    if u32_at(bytes, 12) != 0 || u32_at(bytes, 28) != 0 {
        return Err("reserved header words are not zero".into());
    }
    Ok(u64_at(bytes, 16))
}

/// `log-<first_lsn as 16 hex digits>.shlog`.
pub fn log_file_name(first_lsn: u64) -> String {
    format!("{LOG_PREFIX}{first_lsn:016x}{LOG_SUFFIX}")
}

/// `snapshot-<start_lsn as 16 hex digits>.shsnap`.
pub fn snapshot_file_name(start_lsn: u64) -> String {
    format!("{SNAPSHOT_PREFIX}{start_lsn:016x}{SNAPSHOT_SUFFIX}")
}

fn parse_hex_name(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    let hex = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if hex.len() != 16 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// The first LSN a log file's name carries.
pub fn parse_log_name(name: &str) -> Option<u64> {
    parse_hex_name(name, LOG_PREFIX, LOG_SUFFIX)
}

/// The start LSN a snapshot file's name carries.
pub fn parse_snapshot_name(name: &str) -> Option<u64> {
    parse_hex_name(name, SNAPSHOT_PREFIX, SNAPSHOT_SUFFIX)
}

/// The start LSN of an unfinished snapshot (`snapshot-….shsnap.tmp`).
pub(crate) fn parse_snapshot_tmp_name(name: &str) -> Option<u64> {
    parse_snapshot_name(name.strip_suffix(TMP_SUFFIX)?)
}

/// The name a snapshot is written under before it is complete.
pub(crate) fn snapshot_tmp_name(start_lsn: u64) -> String {
    format!("{}{TMP_SUFFIX}", snapshot_file_name(start_lsn))
}

/// A file of the directory, named by its LSN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirFile {
    /// Its path.
    pub path: PathBuf,
    /// The LSN in its name: a log file's first LSN, a snapshot's start LSN.
    pub lsn: u64,
}

fn list(dir: &Path, parse: fn(&str) -> Option<u64>) -> io::Result<Vec<DirFile>> {
    let mut files = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let Some(lsn) = entry.file_name().to_str().and_then(parse) else {
            continue;
        };
        if entry.file_type()?.is_file() {
            files.push(DirFile {
                path: entry.path(),
                lsn,
            });
        }
    }
    files.sort_by_key(|f| f.lsn);
    Ok(files)
}

/// The log files of `dir`, oldest (lowest first LSN) first. A missing
/// directory has none.
pub fn list_logs(dir: &Path) -> io::Result<Vec<DirFile>> {
    list(dir, parse_log_name)
}

/// The complete snapshots of `dir` (not `.tmp`), oldest first.
pub fn list_snapshots(dir: &Path) -> io::Result<Vec<DirFile>> {
    list(dir, parse_snapshot_name)
}

/// Unfinished snapshots (`.tmp`) left in `dir`, oldest first.
pub(crate) fn list_snapshot_tmps(dir: &Path) -> io::Result<Vec<DirFile>> {
    list(dir, parse_snapshot_tmp_name)
}

/// Makes a file's creation, rename or removal in `dir` durable.
pub(crate) fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_each_check_fires() {
        let h = encode_file_header(LOG_MAGIC, 0x1234);
        assert_eq!(decode_file_header(LOG_MAGIC, &h), Ok(0x1234));
        assert!(decode_file_header(SNAPSHOT_MAGIC, &h)
            .unwrap_err()
            .starts_with("bad magic"));
        assert_eq!(
            decode_file_header(LOG_MAGIC, &h[..31]).unwrap_err(),
            "file header truncated (31 of 32 bytes)"
        );
        let mut flipped = h;
        flipped[17] ^= 1;
        assert_eq!(
            decode_file_header(LOG_MAGIC, &flipped).unwrap_err(),
            "file header checksum mismatch"
        );
        let mut reserved = h;
        reserved[30] = 1;
        assert_eq!(
            decode_file_header(LOG_MAGIC, &reserved).unwrap_err(),
            "reserved header words are not zero"
        );
    }

    #[test]
    fn names_carry_the_lsn() {
        assert_eq!(log_file_name(255), "log-00000000000000ff.shlog");
        assert_eq!(parse_log_name("log-00000000000000ff.shlog"), Some(255));
        assert_eq!(parse_log_name("log-00000000000000FF.shlog"), None);
        assert_eq!(parse_log_name("log-ff.shlog"), None);
        assert_eq!(parse_snapshot_name(&snapshot_file_name(7)), Some(7));
        assert_eq!(parse_snapshot_name(&snapshot_tmp_name(7)), None);
        assert_eq!(parse_snapshot_tmp_name(&snapshot_tmp_name(7)), Some(7));
    }
}
