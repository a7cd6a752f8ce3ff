//! Reading a DUMP payload. Every read goes through [`Reader`], which
//! refuses any length past the bytes left; counts of elements are checked
//! against the bytes left (each element takes at least one) and vectors
//! start at a bounded capacity, so what is allocated grows with what was
//! actually read. Decompressed strings are bounded by LZF's largest ratio.

use std::collections::HashSet;

use super::encode::*;
use super::{intset, listpack, lzf, verify, ziplist, PayloadError, Value};

/// The most elements a vector is given room for up front.
const PREALLOC: usize = 1024;

/// Decodes a DUMP payload: footer first (version and checksum), then the
/// value, which must be well formed and not empty. As in Redis, the value
/// is read from the whole payload: one whose last length runs into the
/// footer's bytes is read with them, and bytes left over are ignored.
pub fn decode(payload: &[u8]) -> Result<Value, PayloadError> {
    verify(payload)?;
    let mut r = Reader {
        buf: payload,
        pos: 0,
    };
    value(&mut r).ok_or(PayloadError::BadFormat)
}

/// A cursor over the payload's body.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// An RDB length prefix: a length, or a special string encoding.
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok()?;
        if n > self.left() {
            return None;
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn prefix(&mut self) -> Option<Len> {
        let first = self.byte()?;
        Some(match first >> 6 {
            LEN_6BIT => Len::Plain((first & 0x3F) as u64),
            LEN_14BIT => Len::Plain(((first as u64 & 0x3F) << 8) | self.byte()? as u64),
            LEN_ENCODED => Len::Encoded(first & 0x3F),
            _ if first == LEN_32BIT => {
                Len::Plain(u32::from_be_bytes(self.take(4)?.try_into().ok()?) as u64)
            }
            _ if first == LEN_64BIT => {
                Len::Plain(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
            }
            _ => return None,
        })
    }

    /// A length that is not a string encoding.
    fn len(&mut self) -> Option<u64> {
        match self.prefix()? {
            Len::Plain(n) => Some(n),
            Len::Encoded(_) => None,
        }
    }

    /// A count of elements each taking at least `min_bytes`: refused when
    /// the bytes left cannot hold that many, and never zero (Redis refuses
    /// empty collections).
    fn count(&mut self, min_bytes: u64) -> Option<usize> {
        let n = self.len()?;
        if n == 0 || n.checked_mul(min_bytes)? > self.left() as u64 {
            return None;
        }
        usize::try_from(n).ok()
    }

    /// An RDB string: plain, an 8/16/32-bit integer, or LZF-compressed.
    fn string(&mut self) -> Option<Vec<u8>> {
        match self.prefix()? {
            Len::Plain(n) => Some(self.take(n)?.to_vec()),
            Len::Encoded(ENC_INT8) => Some((self.byte()? as i8).to_string().into_bytes()),
            Len::Encoded(ENC_INT16) => {
                let v = i16::from_le_bytes(self.take(2)?.try_into().ok()?);
                Some(v.to_string().into_bytes())
            }
            Len::Encoded(ENC_INT32) => {
                let v = i32::from_le_bytes(self.take(4)?.try_into().ok()?);
                Some(v.to_string().into_bytes())
            }
            Len::Encoded(ENC_LZF) => {
                let compressed_len = self.len()?;
                let len = self.len()?;
                let compressed = self.take(compressed_len)?;
                if len == 0 || len > compressed_len.saturating_mul(lzf::MAX_RATIO) {
                    return None;
                }
                lzf::decompress(compressed, usize::try_from(len).ok()?)
            }
            Len::Encoded(_) => None,
        }
    }

    /// A score in the old text form: a length byte (253 NaN, 254 +inf, 255
    /// -inf) and that many characters.
    fn text_double(&mut self) -> Option<f64> {
        match self.byte()? {
            253 => Some(f64::NAN),
            254 => Some(f64::INFINITY),
            255 => Some(f64::NEG_INFINITY),
            n => parse_score(self.take(n as u64)?),
        }
    }

    fn binary_double(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// A score's text as `strtod` reads it (Redis's `zzlStrtod`, `%lg`).
fn parse_score(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?.trim();
    s.parse::<f64>().ok()
}

/// A vector for `n` elements, with room for at most [`PREALLOC`] at first.
fn room<T>(n: usize) -> Vec<T> {
    Vec::with_capacity(n.min(PREALLOC))
}

fn value(r: &mut Reader<'_>) -> Option<Value> {
    let kind = r.byte()?;
    match kind {
        TYPE_STRING => Some(Value::String(r.string()?)),
        TYPE_LIST => {
            let n = r.count(1)?;
            let mut items = room(n);
            for _ in 0..n {
                items.push(r.string()?);
            }
            Some(Value::List(items))
        }
        TYPE_SET => {
            let n = r.count(1)?;
            let mut members = room(n);
            for _ in 0..n {
                members.push(r.string()?);
            }
            set(members)
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = r.count(if kind == TYPE_ZSET { 2 } else { 9 })?;
            let mut pairs = room(n);
            for _ in 0..n {
                let member = r.string()?;
                let score = if kind == TYPE_ZSET {
                    r.text_double()?
                } else {
                    r.binary_double()?
                };
                pairs.push((member, score));
            }
            zset(pairs)
        }
        TYPE_HASH => {
            let n = r.count(2)?;
            let mut pairs = room(n);
            for _ in 0..n {
                let field = r.string()?;
                let value = r.string()?;
                pairs.push((field, value));
            }
            hash(pairs)
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => quicklist(r, kind),
        TYPE_HASH_ZIPMAP => hash(zipmap(&r.string()?)?),
        TYPE_LIST_ZIPLIST => {
            let items = ziplist::decode(&r.string()?)?;
            (!items.is_empty()).then_some(Value::List(items))
        }
        TYPE_SET_INTSET => {
            let ints = intset::decode(&r.string()?)?;
            let members = ints.iter().map(|v| v.to_string().into_bytes()).collect();
            Some(Value::Set(members))
        }
        TYPE_HASH_ZIPLIST => hash(pairs(ziplist::decode(&r.string()?)?)?),
        TYPE_HASH_LISTPACK => hash(pairs(listpack::decode(&r.string()?)?)?),
        TYPE_ZSET_ZIPLIST => zset(scored(ziplist::decode(&r.string()?)?)?),
        TYPE_ZSET_LISTPACK => zset(scored(listpack::decode(&r.string()?)?)?),
        // Modules, streams and anything newer: not values shoal keeps.
        _ => None,
    }
}

/// A quicklist: nodes of ziplists (version 1) or of listpacks and plain
/// elements (version 2). Empty nodes are skipped, an empty list refused.
fn quicklist(r: &mut Reader<'_>, kind: u8) -> Option<Value> {
    let nodes = r.count(2)?;
    let mut items = Vec::new();
    for _ in 0..nodes {
        let container = if kind == TYPE_LIST_QUICKLIST_2 {
            r.len()?
        } else {
            CONTAINER_PACKED
        };
        let data = r.string()?;
        if data.is_empty() {
            return None;
        }
        match container {
            CONTAINER_PLAIN => items.push(data),
            CONTAINER_PACKED if kind == TYPE_LIST_QUICKLIST_2 => {
                items.extend(listpack::decode(&data)?)
            }
            CONTAINER_PACKED => items.extend(ziplist::decode(&data)?),
            _ => return None,
        }
    }
    (!items.is_empty()).then_some(Value::List(items))
}

/// Alternating elements as pairs; None for an odd count.
fn pairs(elements: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if !elements.len().is_multiple_of(2) {
        return None;
    }
    let mut out = room(elements.len() / 2);
    let mut it = elements.into_iter();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Some(out)
}

/// Alternating members and score texts as scored members.
fn scored(elements: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, f64)>> {
    pairs(elements)?
        .into_iter()
        .map(|(m, s)| Some((m, parse_score(&s)?)))
        .collect()
}

/// A set, refused when empty or with a member twice.
fn set(members: Vec<Vec<u8>>) -> Option<Value> {
    let mut seen = HashSet::with_capacity(members.len());
    if members.is_empty() || !members.iter().all(|m| seen.insert(m.as_slice())) {
        return None;
    }
    Some(Value::Set(members))
}

/// A hash, refused when empty or with a field twice.
fn hash(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Option<Value> {
    let mut seen = HashSet::with_capacity(pairs.len());
    if pairs.is_empty() || !pairs.iter().all(|(f, _)| seen.insert(f.as_slice())) {
        return None;
    }
    Some(Value::Hash(pairs))
}

/// A sorted set, refused when empty, with a member twice or a NaN score.
fn zset(pairs: Vec<(Vec<u8>, f64)>) -> Option<Value> {
    let mut seen = HashSet::with_capacity(pairs.len());
    if pairs.is_empty()
        || !pairs
            .iter()
            .all(|(m, s)| !s.is_nan() && seen.insert(m.as_slice()))
    {
        return None;
    }
    Some(Value::ZSet(pairs))
}

/// A zipmap (hashes before Redis 2.6): a count byte (254: unknown), then
/// field length, field, value length, a byte of free space, value and that
/// free space, until a 0xFF. Lengths are one byte, or 254 and a u32 LE.
fn zipmap(zm: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    const BIGLEN: u8 = 254;
    const END: u8 = 255;
    let mut r = Reader { buf: zm, pos: 0 };
    let stated = r.byte()?;
    let length = |r: &mut Reader<'_>| -> Option<u64> {
        match r.byte()? {
            n if n < BIGLEN => Some(n as u64),
            _ => Some(u32::from_le_bytes(r.take(4)?.try_into().ok()?) as u64),
        }
    };
    let mut out = Vec::new();
    loop {
        if *zm.get(r.pos)? == END {
            r.pos += 1;
            break;
        }
        let field_len = length(&mut r)?;
        let field = r.take(field_len)?.to_vec();
        let value_len = length(&mut r)?;
        let free = r.byte()?;
        let value = r.take(value_len)?.to_vec();
        r.take(free as u64)?;
        out.push((field, value));
    }
    if r.left() != 0 || (stated != BIGLEN && stated as usize != out.len()) {
        return None;
    }
    Some(out)
}

/// The library codes of a FUNCTION DUMP payload's body (footer already
/// checked): each is RDB's function opcode and a string. None when the
/// body is anything else.
pub fn decode_functions(body: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut r = Reader { buf: body, pos: 0 };
    let mut codes = Vec::new();
    while r.left() > 0 {
        if r.byte()? != super::OPCODE_FUNCTION2 {
            return None;
        }
        codes.push(r.string()?);
    }
    Some(codes)
}

#[cfg(test)]
mod tests {
    use super::super::fuzzing::sealed;
    use super::*;

    fn bad(body: &[u8]) {
        assert_eq!(
            decode(&sealed(body)),
            Err(PayloadError::BadFormat),
            "{body:?}"
        );
    }

    #[test]
    fn strings_in_every_encoding() {
        let ok = |body: &[u8], want: &[u8]| {
            assert_eq!(decode(&sealed(body)).unwrap(), Value::String(want.to_vec()));
        };
        ok(b"\x00\x03bar", b"bar");
        ok(b"\x00\xC0\x80", b"-128");
        ok(b"\x00\xC1\x38\xff", b"-200");
        ok(b"\x00\xC2\xa0\x86\x01\x00", b"100000");
        // LZF: "aaaa…" (20 bytes) as a literal and a back reference.
        ok(b"\x00\xC3\x05\x14\x00a\xe0\x0a\x00", &[b'a'; 20]);
        bad(b"\x00\x0ebar");
        // A length that runs into the footer reads its bytes, as Redis does.
        ok(b"\x00\x05bar", b"bar\n\x00");
        bad(b"\x00\xC4");
        bad(b"\x00\xC3\x05\x15\x00a\xe0\x0a\x00");
        bad(b"\x00\xC3\x05\x00\x00a\xe0\x0a\x00");
        bad(b"");
    }

    #[test]
    fn old_collection_encodings() {
        // A plain list, set, hash and a zset with text scores.
        assert_eq!(
            decode(&sealed(b"\x01\x02\x01a\xC0\x07")).unwrap(),
            Value::List(vec![b"a".to_vec(), b"7".to_vec()])
        );
        assert_eq!(
            decode(&sealed(b"\x02\x02\x01a\x01b")).unwrap(),
            Value::Set(vec![b"a".to_vec(), b"b".to_vec()])
        );
        bad(b"\x02\x02\x01a\x01a");
        assert_eq!(
            decode(&sealed(b"\x04\x01\x01f\x01v")).unwrap(),
            Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())])
        );
        assert_eq!(
            decode(&sealed(b"\x03\x02\x01a\x031.5\x01b\xfe")).unwrap(),
            Value::ZSet(vec![(b"a".to_vec(), 1.5), (b"b".to_vec(), f64::INFINITY)])
        );
        bad(b"\x03\x01\x01a\xfd");
        // A zipmap of one pair, with a byte of free space.
        assert_eq!(
            decode(&sealed(b"\x09\x09\x01\x01f\x02\x01vvx\xff")).unwrap(),
            Value::Hash(vec![(b"f".to_vec(), b"vv".to_vec())])
        );
        bad(b"\x09\x09\x02\x01f\x02\x01vvx\xff");
    }

    #[test]
    fn empty_and_unknown_values_are_refused() {
        bad(b"\x01\x00");
        bad(b"\x02\x00");
        bad(b"\x04\x00");
        bad(b"\x05\x00");
        bad(b"\x12\x00");
        // A stream, a module value, a type past Redis 7.0's.
        bad(b"\x0f\x00");
        bad(b"\x07\x00");
        bad(b"\x14\x00");
        // A count the bytes left cannot hold.
        bad(b"\x01\x80\xff\xff\xff\xff\x01a");
        bad(b"\x01\x81\xff\xff\xff\xff\xff\xff\xff\xff\x01a");
    }
}
