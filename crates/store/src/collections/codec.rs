//! The compact byte form of a collection value: a tag byte, a varint count,
//! then the items, each a varint length and its bytes (sorted-set items are
//! an 8-byte score first; an intset is 8-byte integers). The bytes come from
//! shared memory, so decoding checks every length (I1) and a value that does
//! not decode is `Error::BadValue`, never a panic.

use crate::error::{Error, Result};

/// Tag of a value whose items are length-prefixed byte strings.
pub(crate) const TAG_ITEMS: u8 = 1;
/// Tag of a set whose members are all integers, stored as sorted i64s.
pub(crate) const TAG_INTSET: u8 = 2;

/// Appends `n` as a LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends a length-prefixed byte string.
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Starts an encoding: tag and item count.
pub(crate) fn header(out: &mut Vec<u8>, tag: u8, count: usize) {
    out.clear();
    out.push(tag);
    put_varint(out, count as u64);
}

/// A checked reader over an encoded value.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads the tag and count; the count is bounded by the bytes left, so
    /// a damaged count cannot make a caller reserve a huge buffer.
    pub(crate) fn open(bytes: &'a [u8]) -> Result<(Reader<'a>, u8, usize)> {
        let mut r = Reader { bytes, pos: 0 };
        let tag = r.byte()?;
        let count = r.varint()?;
        if count > bytes.len() as u64 {
            return Err(Error::BadValue);
        }
        Ok((r, tag, count as usize))
    }

    /// A reader over bytes with no tag or count of their own.
    pub(crate) fn over(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    /// A reader over `bytes` from `pos` on; the spans it returns are
    /// positions in `bytes`.
    pub(crate) fn at(bytes: &'a [u8], pos: usize) -> Reader<'a> {
        Reader { bytes, pos }
    }

    /// How far the reader has read.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self.bytes.get(self.pos).ok_or(Error::BadValue)?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn varint(&mut self) -> Result<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(Error::BadValue)
    }

    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>> {
        let span = self.span()?;
        Ok(self.bytes[span].to_vec())
    }

    /// Where the next length-prefixed string's bytes are, in the bytes
    /// the reader was opened on.
    pub(crate) fn span(&mut self) -> Result<std::ops::Range<usize>> {
        let len = self.varint()?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| self.pos.checked_add(l))
            .filter(|&e| e <= self.bytes.len())
            .ok_or(Error::BadValue)?;
        let start = self.pos;
        self.pos = end;
        Ok(start..end)
    }

    /// The bytes not read yet, all of them (the reader ends there).
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let rest = self.bytes.get(self.pos..).unwrap_or(&[]);
        self.pos = self.bytes.len();
        rest
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let end = self.pos + 8;
        let b = self.bytes.get(self.pos..end).ok_or(Error::BadValue)?;
        self.pos = end;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| Error::BadValue)?,
        ))
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(self) -> Result<()> {
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(Error::BadValue)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_damage_is_an_error() {
        let mut out = Vec::new();
        header(&mut out, TAG_ITEMS, 2);
        put_bytes(&mut out, b"abc");
        put_bytes(&mut out, &[7u8; 300]);
        let (mut r, tag, n) = Reader::open(&out).unwrap();
        assert_eq!((tag, n), (TAG_ITEMS, 2));
        assert_eq!(r.bytes().unwrap(), b"abc");
        assert_eq!(r.bytes().unwrap().len(), 300);
        r.finish().unwrap();
        for cut in 0..out.len() {
            let res = Reader::open(&out[..cut]).and_then(|(mut r, _, n)| {
                for _ in 0..n {
                    r.bytes()?;
                }
                r.finish()
            });
            assert!(res.is_err(), "cut at {cut}");
        }
    }
}
