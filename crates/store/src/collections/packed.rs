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

use std::collections::VecDeque;
use std::ops::Range;

use super::codec::{self, Reader};
use crate::error::{Error, Result};

/// Items in insertion order, each `PARTS` length-prefixed byte strings
/// back to back (a hash's field and value, a set's member). An item is
/// found by its first part.
#[derive(Debug, Default, Clone)]
pub(crate) struct Packed<const PARTS: usize> {
    count: usize,
    /// The bytes of every part, without their lengths.
    data: usize,
    bytes: Vec<u8>,
}

/// A small hash: field, then value.
pub(crate) type Pairs = Packed<2>;
/// A small set: the member.
pub(crate) type Members = Packed<1>;

/// Where one item lies in [`Packed::bytes`].
struct Span<const PARTS: usize> {
    /// From the first part's length to the last part's last byte.
    whole: Range<usize>,
    /// Each part's bytes.
    parts: [Range<usize>; PARTS],
}

impl<const PARTS: usize> Span<PARTS> {
    fn data(&self) -> usize {
        self.parts.iter().map(Range::len).sum()
    }
}

fn span_at<const PARTS: usize>(bytes: &[u8], pos: usize) -> Option<Span<PARTS>> {
    let mut r = Reader::at(bytes, pos);
    let mut parts: [Range<usize>; PARTS] = std::array::from_fn(|_| 0..0);
    for part in &mut parts {
        *part = r.span().ok()?;
    }
    Some(Span {
        whole: pos..r.position(),
        parts,
    })
}

impl<const PARTS: usize> Packed<PARTS> {
    /// Takes `count` items from `r` (the rest of a compact value after its
    /// header), checking every length.
    pub(crate) fn parse(r: &mut Reader<'_>, count: usize) -> Result<Self> {
        let bytes = r.rest().to_vec();
        let (mut pos, mut data) = (0, 0);
        for _ in 0..count {
            let span = span_at::<PARTS>(&bytes, pos).ok_or(Error::BadValue)?;
            data += span.data();
            pos = span.whole.end;
        }
        if pos != bytes.len() {
            return Err(Error::BadValue);
        }
        Ok(Packed { count, data, bytes })
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The bytes of every part, without their lengths.
    pub(crate) fn data_bytes(&self) -> usize {
        self.data
    }

    /// Appends the compact form: header, then the items as they are.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, tag: u8) {
        codec::header(out, tag, self.count);
        out.extend_from_slice(&self.bytes);
    }

    fn spans(&self) -> impl Iterator<Item = Span<PARTS>> + '_ {
        let mut pos = 0;
        (0..self.count).map_while(move |_| {
            let span = span_at(&self.bytes, pos)?;
            pos = span.whole.end;
            Some(span)
        })
    }

    /// Every item's parts, in order.
    fn items(&self) -> impl Iterator<Item = [&[u8]; PARTS]> + '_ {
        self.spans().map(|s| s.parts.map(|part| &self.bytes[part]))
    }

    fn find(&self, first: &[u8]) -> Option<Span<PARTS>> {
        self.spans()
            .find(|s| &self.bytes[s.parts[0].clone()] == first)
    }

    /// Appends an item whose first part the caller knows is not there.
    fn push(&mut self, parts: [&[u8]; PARTS]) {
        for part in parts {
            codec::put_bytes(&mut self.bytes, part);
            self.data += part.len();
        }
        self.count += 1;
    }

    /// Removes the item whose first part is `first`; true when it was
    /// there. The others keep their order.
    pub(crate) fn remove(&mut self, first: &[u8]) -> bool {
        match self.find(first) {
            Some(s) => {
                self.data -= s.data();
                self.bytes.drain(s.whole);
                self.count -= 1;
                true
            }
            None => false,
        }
    }

    /// Keeps the items whose first part `keep` accepts, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let mut out = Packed::default();
        for item in self.items() {
            if keep(item[0]) {
                out.push(item);
            }
        }
        *self = out;
    }
}

impl Pairs {
    /// Every field and value, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.items().map(|[f, v]| (f, v))
    }

    pub(crate) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|s| &self.bytes[s.parts[1].clone()])
    }

    /// The pair at position `index`.
    pub(crate) fn nth(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.iter().nth(index)
    }

    /// Sets `field` to `value`; true when the field is new (it goes last;
    /// an existing one keeps its place).
    pub(crate) fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let Some(s) = self.find(field) else {
            self.push([field, value]);
            return true;
        };
        let [field_at, value_at] = s.parts;
        if value_at.len() == value.len() {
            self.bytes[value_at].copy_from_slice(value);
        } else {
            self.data = self.data - value_at.len() + value.len();
            let mut encoded = Vec::with_capacity(value.len() + 5);
            codec::put_bytes(&mut encoded, value);
            // From the value's length to its last byte.
            self.bytes.splice(field_at.end..s.whole.end, encoded);
        }
        false
    }

    /// Pairs from owned fields and values (a paged hash made compact
    /// again), in the order given. The fields must be distinct.
    pub(crate) fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Pairs {
        let mut out = Pairs::default();
        for (f, v) in pairs {
            out.push([f, v]);
        }
        out
    }
}

impl Members {
    /// Every member, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.items().map(|[m]| m)
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
        self.push([member]);
        true
    }

    /// Members from distinct byte strings, in the order given.
    pub(crate) fn from_members<M: AsRef<[u8]>>(members: impl IntoIterator<Item = M>) -> Members {
        let mut out = Members::default();
        for m in members {
            out.push([m.as_ref()]);
        }
        out
    }
}

/// A small list: its items as places in one arena of bytes. Opening it
/// copies the value's bytes once and makes no allocation per item, as
/// [`Packed`]; unlike it, a list is read and edited by position (LINDEX,
/// LSET, LINSERT, a pop at either end), which the places answer at once.
/// An item added goes at the arena's end and one removed leaves its bytes
/// there: the arena lives for one command.
#[derive(Debug, Default, Clone)]
pub(crate) struct Sequence {
    places: VecDeque<Range<usize>>,
    arena: Vec<u8>,
}

impl Sequence {
    /// Takes `count` items from `r` (the rest of a compact value after its
    /// header), checking every length.
    pub(crate) fn parse(r: &mut Reader<'_>, count: usize) -> Result<Sequence> {
        let arena = r.rest().to_vec();
        let mut at = Reader::over(&arena);
        let mut places = VecDeque::with_capacity(count);
        for _ in 0..count {
            places.push_back(at.span()?);
        }
        at.finish()?;
        Ok(Sequence { places, arena })
    }

    /// Items from byte strings, in the order given.
    pub(crate) fn from_items<M: AsRef<[u8]>>(items: impl IntoIterator<Item = M>) -> Sequence {
        let mut out = Sequence::default();
        for item in items {
            out.push_back(item.as_ref());
        }
        out
    }

    pub(crate) fn len(&self) -> usize {
        self.places.len()
    }

    /// The bytes of every item, without their lengths.
    pub(crate) fn data_bytes(&self) -> usize {
        self.places.iter().map(Range::len).sum()
    }

    /// Appends the compact form: header, then each item.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, tag: u8) {
        codec::header(out, tag, self.len());
        for item in self.iter() {
            codec::put_bytes(out, item);
        }
    }

    /// The items from the head, or from the tail with `.rev()`.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator + '_ {
        self.places.iter().map(|p| &self.arena[p.clone()])
    }

    /// The items at positions `range` (within the list).
    pub(crate) fn range(&self, range: Range<usize>) -> impl Iterator<Item = &[u8]> + '_ {
        self.places.range(range).map(|p| &self.arena[p.clone()])
    }

    pub(crate) fn get(&self, index: usize) -> Option<&[u8]> {
        self.places.get(index).map(|p| &self.arena[p.clone()])
    }

    /// Copies `item` to the arena's end.
    fn place(&mut self, item: &[u8]) -> Range<usize> {
        let start = self.arena.len();
        self.arena.extend_from_slice(item);
        start..self.arena.len()
    }

    pub(crate) fn push_front(&mut self, item: &[u8]) {
        let p = self.place(item);
        self.places.push_front(p);
    }

    pub(crate) fn push_back(&mut self, item: &[u8]) {
        let p = self.place(item);
        self.places.push_back(p);
    }

    /// Inserts `item` at `index` (≤ len).
    pub(crate) fn insert(&mut self, index: usize, item: &[u8]) {
        let p = self.place(item);
        self.places.insert(index, p);
    }

    /// Replaces the item at `index`; false when there is none.
    pub(crate) fn set(&mut self, index: usize, item: &[u8]) -> bool {
        if index >= self.len() {
            return false;
        }
        let p = self.place(item);
        self.places[index] = p;
        true
    }

    pub(crate) fn remove(&mut self, index: usize) -> Option<Vec<u8>> {
        self.places.remove(index).map(|p| self.arena[p].to_vec())
    }

    /// Keeps the items `keep` accepts, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let arena = &self.arena;
        self.places.retain(|p| keep(&arena[p.clone()]));
    }

    /// Keeps only the items at positions `start..end` (within the list).
    pub(crate) fn keep_range(&mut self, start: usize, end: usize) {
        self.places.truncate(end);
        self.places.drain(..start);
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

    proptest! {
        /// A list's bytes: any bytes fail to parse or give items that
        /// every edit handles, and the result round-trips.
        #[test]
        fn any_list_bytes_parse_or_fail_and_never_panic(
            items in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..140), 0..12),
            damage in proptest::option::of((any::<usize>(), any::<u8>())),
            item in proptest::collection::vec(any::<u8>(), 0..3),
            at in any::<usize>(),
        ) {
            let mut bytes = Vec::new();
            Sequence::from_items(&items).encode(&mut bytes, TAG_ITEMS);
            if let Some((at, byte)) = damage {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            let Ok((mut r, _, n)) = Reader::open(&bytes) else { return Ok(()) };
            let Ok(mut s) = Sequence::parse(&mut r, n) else { return Ok(()) };
            let at = at % (n + 1);
            s.insert(at, &item);
            prop_assert_eq!(s.get(at), Some(&item[..]));
            s.push_front(b"h");
            s.push_back(b"t");
            prop_assert!(s.set(0, b"head"));
            prop_assert!(!s.set(s.len(), b"x"));
            let mut out = Vec::new();
            s.encode(&mut out, TAG_ITEMS);
            let (mut r, _, m) = Reader::open(&out).unwrap();
            let again = Sequence::parse(&mut r, m).unwrap();
            prop_assert_eq!(again.iter().collect::<Vec<_>>(), s.iter().collect::<Vec<_>>());
            prop_assert_eq!(again.data_bytes(), s.data_bytes());
            prop_assert_eq!(s.remove(0), Some(b"head".to_vec()));
            s.retain(|x| x != item.as_slice());
            prop_assert!(s.iter().all(|x| x != item.as_slice()));
            let len = s.len();
            s.keep_range(len / 3, len - len / 3);
            prop_assert_eq!(s.len(), len - len / 3 - len / 3);
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
