//! Reading frames off a file in chunks: files can be gigabytes, so nothing
//! reads a whole file into memory; the buffer grows only to hold the largest
//! frame ([`MAX_RECORD`] bounds it).

use std::io::{self, Read};

use store::log::frame::{decode_frame_header, parse_frame, FrameHeader, MAX_RECORD};
use store::log::{frame_size, FrameError, FRAME_HEADER};

/// Bytes read from the file at a time.
const CHUNK: usize = 1 << 20;

/// What the next bytes of the stream are.
pub(crate) enum Next<'a> {
    /// A valid frame.
    Frame {
        /// Its byte offset in the file.
        offset: u64,
        /// Its header.
        header: FrameHeader,
        /// Its payload.
        payload: &'a [u8],
        /// Its size in bytes.
        size: u64,
    },
    /// The region ended exactly after the previous frame.
    End,
    /// The bytes at `offset` are not a valid frame.
    Bad {
        /// Byte offset in the file.
        offset: u64,
        /// Why.
        error: FrameError,
    },
}

/// Frames of one region of a file, read in chunks.
pub(crate) struct FrameStream<R> {
    reader: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    offset: u64,
    /// Bytes of the region not yet read from `reader`.
    unread: u64,
    /// CRC32C of every byte read so far, when asked for.
    crc: Option<u32>,
}

impl<R: Read> FrameStream<R> {
    /// Frames from `reader`, positioned at file offset `offset`, over the next
    /// `len` bytes. `crc` starts a running checksum over them.
    pub(crate) fn new(reader: R, offset: u64, len: u64, crc: Option<u32>) -> Self {
        FrameStream {
            reader,
            buf: Vec::new(),
            start: 0,
            end: 0,
            offset,
            unread: len,
            crc,
        }
    }

    /// The running checksum, covering every byte read so far.
    pub(crate) fn crc(&self) -> Option<u32> {
        self.crc
    }

    /// Makes at least `need` bytes available from `start`; false if the region
    /// (or the file) ends first.
    fn fill(&mut self, need: usize) -> io::Result<bool> {
        while self.end - self.start < need {
            if self.unread == 0 {
                return Ok(false);
            }
            if self.buf.len() - self.start < need || self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.buf.len() < need.max(CHUNK) {
                    self.buf.resize(need.max(CHUNK), 0);
                }
            }
            let want = (self.buf.len() - self.end).min(self.unread.min(usize::MAX as u64) as usize);
            let n = match self.reader.read(&mut self.buf[self.end..self.end + want]) {
                Ok(0) => {
                    self.unread = 0;
                    return Ok(false);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if let Some(crc) = self.crc.as_mut() {
                *crc = crc32c::crc32c_append(*crc, &self.buf[self.end..self.end + n]);
            }
            self.end += n;
            self.unread -= n as u64;
        }
        Ok(true)
    }

    /// The next frame, which must carry `expect_lsn` (any LSN when `None`).
    pub(crate) fn next(&mut self, expect_lsn: Option<u64>) -> io::Result<Next<'_>> {
        let offset = self.offset;
        let bad = |error| Ok(Next::Bad { offset, error });
        if !self.fill(1)? {
            return Ok(Next::End);
        }
        if !self.fill(FRAME_HEADER)? {
            return bad(FrameError::Truncated);
        }
        let mut head = [0u8; FRAME_HEADER];
        head.copy_from_slice(&self.buf[self.start..self.start + FRAME_HEADER]);
        let header = decode_frame_header(&head);
        let expect = expect_lsn.unwrap_or(header.lsn);
        if header.lsn != expect {
            return bad(FrameError::BadLsn {
                found: header.lsn,
                expected: expect,
            });
        }
        if header.len as usize > MAX_RECORD {
            return bad(FrameError::TooLong(header.len));
        }
        let size = frame_size(header.len as usize);
        if !self.fill(size as usize)? {
            return bad(FrameError::Truncated);
        }
        let at = self.start;
        if let Err(error) = parse_frame(&self.buf[at..at + size as usize], expect) {
            return bad(error);
        }
        self.start += size as usize;
        self.offset += size;
        Ok(Next::Frame {
            offset,
            header,
            payload: &self.buf[at + FRAME_HEADER..at + FRAME_HEADER + header.len as usize],
            size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::log::encode_frame;

    #[test]
    fn frames_larger_than_a_chunk_and_a_short_tail() {
        let mut bytes = Vec::new();
        let big = vec![7u8; CHUNK + 100];
        encode_frame(0, b"small", &mut bytes);
        let second = bytes.len() as u64;
        encode_frame(second, &big, &mut bytes);
        let third = bytes.len() as u64;
        encode_frame(third, b"x", &mut bytes);
        bytes.truncate(bytes.len() - 3);
        let len = bytes.len() as u64;
        let mut s = FrameStream::new(&bytes[..], 0, len, Some(0));
        let mut lsn = 0;
        for want in [&b"small"[..], &big[..]] {
            match s.next(Some(lsn)).unwrap() {
                Next::Frame { payload, size, .. } => {
                    assert_eq!(payload, want);
                    lsn += size;
                }
                _ => panic!("expected a frame at {lsn}"),
            }
        }
        match s.next(Some(lsn)).unwrap() {
            Next::Bad { offset, error } => {
                assert_eq!((offset, error), (third, FrameError::Truncated))
            }
            _ => panic!("expected a truncated frame"),
        }
        assert_eq!(s.crc(), Some(crc32c::crc32c(&bytes)));
    }
}
