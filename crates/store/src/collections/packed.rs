//! A small hash ([`Pairs`]) or set ([`Members`]) kept as its compact bytes
//! (codec.rs's items) while it is open: a write edits the bytes, as Redis
//! edits a listpack, rather than decoding every item into an allocation of
//! its own and encoding them all again. Lookups scan, which is what a
//! listpack does too: a compact hash has at most
//! `hash-max-listpack-entries` fields, a compact set 512 members.
//!
//! The bytes come from shared memory, so `parse` checks every length once;
//! the methods after it only see bytes this type wrote, and still never
//! index past them. It does not look for a repeated item: that would cost a
//! hash per item on every write of the value, and only a scribble makes
//! one. Such a value still answers consistently (the first of the two is
//! the item) and is refused where it would matter, when it becomes a paged
//! tree (`settle` in hash.rs and set.rs).

use std::ops::Range;

use super::codec::{self, Reader};
use crate::error::{Error, Result};

/// Field/value pairs in insertion order: each a varint length and its
/// bytes, field then value.
#[derive(Debug, Default)]
pub(crate) struct Pairs {
    count: usize,
    /// The bytes of every field and value, without their lengths.
    data: usize,
    bytes: Vec<u8>,
}

/// Where one pair lies in [`Pairs::bytes`].
struct Span {
    /// From the field's length to the value's last byte.
    whole: Range<usize>,
    field: Range<usize>,
    /// From the value's length to its last byte.
    value_with_len: Range<usize>,
    value: Range<usize>,
}

fn span_at(bytes: &[u8], pos: usize) -> Option<Span> {
    let mut r = Reader::at(bytes, pos);
    let field = r.span().ok()?;
    let value = r.span().ok()?;
    Some(Span {
        whole: pos..value.end,
        value_with_len: field.end..value.end,
        field,
        value,
    })
}

impl Pairs {
    /// Takes `count` pairs from `r` (the rest of a compact value after its
    /// header), checking every length.
    pub(crate) fn parse(r: &mut Reader<'_>, count: usize) -> Result<Pairs> {
        let bytes = r.rest().to_vec();
        let (mut pos, mut data) = (0, 0);
        for _ in 0..count {
            let span = span_at(&bytes, pos).ok_or(Error::BadValue)?;
            data += span.field.len() + span.value.len();
            pos = span.whole.end;
        }
        if pos != bytes.len() {
            return Err(Error::BadValue);
        }
        Ok(Pairs { count, data, bytes })
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The bytes of every field and value, without their lengths.
    pub(crate) fn data_bytes(&self) -> usize {
        self.data
    }

    /// Appends the compact form: header, then the pairs as they are.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, tag: u8) {
        codec::header(out, tag, self.count);
        out.extend_from_slice(&self.bytes);
    }

    fn spans(&self) -> impl Iterator<Item = Span> + '_ {
        let mut pos = 0;
        (0..self.count).map_while(move |_| {
            let span = span_at(&self.bytes, pos)?;
            pos = span.whole.end;
            Some(span)
        })
    }

    /// Every field and value, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.spans()
            .map(|s| (&self.bytes[s.field], &self.bytes[s.value]))
    }

    fn find(&self, field: &[u8]) -> Option<Span> {
        self.spans().find(|s| &self.bytes[s.field.clone()] == field)
    }

    pub(crate) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|s| &self.bytes[s.value])
    }

    /// The pair at position `index`.
    pub(crate) fn nth(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.iter().nth(index)
    }

    /// Sets `field` to `value`; true when the field is new (it goes last;
    /// an existing one keeps its place).
    pub(crate) fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        match self.find(field) {
            Some(s) if s.value.len() == value.len() => {
                self.bytes[s.value].copy_from_slice(value);
                false
            }
            Some(s) => {
                self.data = self.data - s.value.len() + value.len();
                let mut encoded = Vec::with_capacity(value.len() + 5);
                codec::put_bytes(&mut encoded, value);
                self.bytes.splice(s.value_with_len, encoded);
                false
            }
            None => {
                codec::put_bytes(&mut self.bytes, field);
                codec::put_bytes(&mut self.bytes, value);
                self.count += 1;
                self.data += field.len() + value.len();
                true
            }
        }
    }

    /// Removes `field`; true when it was there. The others keep their order.
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        match self.find(field) {
            Some(s) => {
                self.data -= s.field.len() + s.value.len();
                self.bytes.drain(s.whole);
                self.count -= 1;
                true
            }
            None => false,
        }
    }

    /// Keeps the pairs whose field `keep` accepts, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let mut out = Vec::with_capacity(self.bytes.len());
        let (mut count, mut data) = (0, 0);
        for s in self.spans() {
            if keep(&self.bytes[s.field.clone()]) {
                data += s.field.len() + s.value.len();
                out.extend_from_slice(&self.bytes[s.whole]);
                count += 1;
            }
        }
        self.bytes = out;
        self.count = count;
        self.data = data;
    }

    /// Pairs from owned fields and values (a paged hash made compact
    /// again), in the order given. The fields must be distinct.
    pub(crate) fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Pairs {
        let mut out = Pairs::default();
        for (f, v) in pairs {
            codec::put_bytes(&mut out.bytes, f);
            codec::put_bytes(&mut out.bytes, v);
            out.count += 1;
            out.data += f.len() + v.len();
        }
        out
    }
}

/// Members in insertion order: each a varint length and its bytes.
#[derive(Debug, Default, Clone)]
pub(crate) struct Members {
    count: usize,
    /// The bytes of every member, without their lengths.
    data: usize,
    bytes: Vec<u8>,
}

impl Members {
    /// Takes `count` members from `r` (the rest of a compact value after
    /// its header), checking every length.
    pub(crate) fn parse(r: &mut Reader<'_>, count: usize) -> Result<Members> {
        let bytes = r.rest().to_vec();
        let mut at = Reader::over(&bytes);
        let mut data = 0;
        for _ in 0..count {
            data += at.span()?.len();
        }
        at.finish()?;
        Ok(Members { count, data, bytes })
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The bytes of every member, without their lengths.
    pub(crate) fn data_bytes(&self) -> usize {
        self.data
    }

    /// Appends the compact form: header, then the members as they are.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, tag: u8) {
        codec::header(out, tag, self.count);
        out.extend_from_slice(&self.bytes);
    }

    /// Each member's place: from its length to its last byte, and its bytes.
    fn spans(&self) -> impl Iterator<Item = (Range<usize>, Range<usize>)> + '_ {
        let mut r = Reader::over(&self.bytes);
        (0..self.count).map_while(move |_| {
            let start = r.position();
            let member = r.span().ok()?;
            Some((start..member.end, member))
        })
    }

    /// Every member, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans().map(|(_, m)| &self.bytes[m])
    }

    fn find(&self, member: &[u8]) -> Option<Range<usize>> {
        self.spans()
            .find(|(_, m)| &self.bytes[m.clone()] == member)
            .map(|(whole, _)| whole)
    }

    pub(crate) fn contains(&self, member: &[u8]) -> bool {
        self.find(member).is_some()
    }

    /// The member at position `index`.
    pub(crate) fn nth(&self, index: usize) -> Option<&[u8]> {
        self.iter().nth(index)
    }

    /// Adds `member` last; true when it is new.
    pub(crate) fn insert(&mut self, member: &[u8]) -> bool {
        if self.contains(member) {
            return false;
        }
        self.push(member);
        true
    }

    /// Appends `member`, which the caller knows is not there.
    fn push(&mut self, member: &[u8]) {
        codec::put_bytes(&mut self.bytes, member);
        self.count += 1;
        self.data += member.len();
    }

    /// Removes `member`; true when it was there. The others keep their order.
    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        match self.find(member) {
            Some(whole) => {
                self.data -= member.len();
                self.bytes.drain(whole);
                self.count -= 1;
                true
            }
            None => false,
        }
    }

    /// Keeps the members `keep` accepts, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let mut out = Members::default();
        for m in self.iter() {
            if keep(m) {
                out.push(m);
            }
        }
        *self = out;
    }

    /// Members from distinct byte strings, in the order given.
    pub(crate) fn from_members<M: AsRef<[u8]>>(members: impl IntoIterator<Item = M>) -> Members {
        let mut out = Members::default();
        for m in members {
            out.push(m.as_ref());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::collections::codec::TAG_ITEMS;

    proptest! {
        /// Any bytes (shared memory is untrusted) either fail to parse or
        /// give pairs that every method handles without a panic.
        #[test]
        fn any_bytes_parse_or_fail_and_never_panic(
            pairs in proptest::collection::vec(
                (proptest::collection::vec(0u8..4, 0..3), proptest::collection::vec(any::<u8>(), 0..150)),
                0..12,
            ),
            damage in proptest::option::of((any::<usize>(), any::<u8>())),
            field in proptest::collection::vec(0u8..4, 0..3),
            value in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            // Well-formed bytes (repeated fields included), or the same
            // with one byte changed.
            let mut bytes = Vec::new();
            Pairs::from_pairs(pairs.iter().map(|(f, v)| (f.as_slice(), v.as_slice())))
                .encode(&mut bytes, TAG_ITEMS);
            if let Some((at, byte)) = damage {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            let Ok((mut r, _, n)) = Reader::open(&bytes) else { return Ok(()) };
            let Ok(mut p) = Pairs::parse(&mut r, n) else { return Ok(()) };
            let _ = p.get(&field);
            let _ = p.nth(n / 2);
            p.set(&field, &value);
            prop_assert_eq!(p.get(&field), Some(&value[..]));
            let data = p.data_bytes();
            let q = reparse(&p).unwrap();
            prop_assert_eq!(q.data_bytes(), data);
            p.retain(|f| f != field.as_slice());
            prop_assert!(p.get(&field).is_none());
            prop_assert!(!p.remove(&field));
        }
    }

    proptest! {
        /// The same for members: any bytes fail to parse or give members
        /// every method handles, and edits round-trip.
        #[test]
        fn any_member_bytes_parse_or_fail_and_never_panic(
            members in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..3), 0..12),
            damage in proptest::option::of((any::<usize>(), any::<u8>())),
            member in proptest::collection::vec(0u8..4, 0..3),
        ) {
            let mut bytes = Vec::new();
            Members::from_members(&members).encode(&mut bytes, TAG_ITEMS);
            if let Some((at, byte)) = damage {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            let Ok((mut r, _, n)) = Reader::open(&bytes) else { return Ok(()) };
            let Ok(mut m) = Members::parse(&mut r, n) else { return Ok(()) };
            let _ = m.nth(n / 2);
            m.insert(&member);
            prop_assert!(m.contains(&member));
            let mut out = Vec::new();
            m.encode(&mut out, TAG_ITEMS);
            let (mut r, _, n) = Reader::open(&out).unwrap();
            let again = Members::parse(&mut r, n).unwrap();
            prop_assert_eq!(again.data_bytes(), m.data_bytes());
            prop_assert_eq!(again.iter().collect::<Vec<_>>(), m.iter().collect::<Vec<_>>());
            m.retain(|x| x != member.as_slice());
            prop_assert!(!m.contains(&member));
            prop_assert!(!m.remove(&member));
        }
    }

    fn reparse(p: &Pairs) -> Result<Pairs> {
        let mut out = Vec::new();
        p.encode(&mut out, TAG_ITEMS);
        let (mut r, _, n) = Reader::open(&out)?;
        Pairs::parse(&mut r, n)
    }

    #[test]
    fn edits_keep_insertion_order_and_round_trip() {
        let mut p = Pairs::default();
        assert!(p.set(b"a", b"1"));
        assert!(p.set(b"b", &[7u8; 200]));
        assert!(p.set(b"c", b"3"));
        assert!(!p.set(b"a", b"x")); // same length: in place
        assert!(!p.set(b"b", b"short")); // the varint shrinks
        assert!(!p.set(b"c", &[9u8; 300])); // and grows
        let got: Vec<_> = p.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), b"x".to_vec()),
                (b"b".to_vec(), b"short".to_vec()),
                (b"c".to_vec(), vec![9u8; 300]),
            ]
        );
        assert!(p.remove(b"b"));
        assert!(!p.remove(b"b"));
        assert_eq!(p.get(b"c"), Some(&[9u8; 300][..]));
        assert_eq!(p.nth(1).map(|(f, _)| f), Some(&b"c"[..]));
        let q = reparse(&p).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q.data_bytes(), 1 + 1 + 1 + 300);
        assert_eq!(p.data_bytes(), q.data_bytes());
        let mut q = q;
        q.retain(|f| f != b"a");
        assert_eq!(
            q.iter().map(|(f, _)| f.to_vec()).collect::<Vec<_>>(),
            [b"c".to_vec()]
        );
    }

    #[test]
    fn damaged_bytes_are_refused() {
        let mut p = Pairs::default();
        for i in 0..20u8 {
            p.set(&[b'f', i], &[i; 3]);
        }
        let mut out = Vec::new();
        p.encode(&mut out, TAG_ITEMS);
        for cut in 2..out.len() {
            let parsed =
                Reader::open(&out[..cut]).and_then(|(mut r, _, n)| Pairs::parse(&mut r, n));
            assert!(parsed.is_err(), "cut at {cut}");
        }
    }
}
