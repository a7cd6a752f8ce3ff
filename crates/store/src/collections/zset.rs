//! Sorted sets.

use std::cmp::Ordering;

use super::codec::{self, Reader, TAG_ITEMS};
use super::tree::Tree;
use super::{hashed_key, scan_tree, unhashed, Collection, Journal, Scored, Segment};
use crate::error::{Error, Result};
use crate::keyspace::entry::ValueType;

/// Redis 7.0's `zset-max-listpack-entries` / `-value` defaults.
const LISTPACK_ENTRIES: usize = 128;
const LISTPACK_VALUE: usize = 64;
/// A sorted set with more members than this, or more bytes, is paged.
const COMPACT_ITEMS: usize = LISTPACK_ENTRIES;
const COMPACT_BYTES: usize = 64 * 1024;

/// A sorted set: members ordered by (score, member bytes), as Redis orders
/// them. Ranks are 0-based in that order. Scores are never NaN.
///
/// Paged, it is two keyed trees: `by_score` holds (score key ‖ member) →
/// score in rank order, and `by_member` holds (member hash ‖ member) →
/// score, so that ZSCORE, ZRANK and ZADD find a member in O(log n), as the
/// skiplist and dict of Redis do.
#[derive(Debug)]
pub struct ZSet {
    body: Body,
    changed: bool,
    journal: Journal,
}

// One ZSet lives per command: boxing the trees would cost an allocation
// per command to save stack bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Body {
    Compact {
        /// In order of score, then member. A member's score is found by
        /// a scan (at most `COMPACT_ITEMS` members), as Redis scans a
        /// listpack: a map beside it cost a copy and a hash of every member
        /// each time the value was opened.
        sorted: Sorted,
    },
    Paged {
        by_score: Tree,
        by_member: Tree,
        /// A member whose new score `by_member` sets in place at the
        /// commit ([`Tree::overwrite`]): its score until then.
        moved: Option<(Vec<u8>, f64)>,
    },
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet {
            body: Body::Compact {
                sorted: Sorted::default(),
            },
            changed: false,
            journal: Journal::default(),
        }
    }
}

fn order(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

/// A score as 8 bytes that sort as the scores do (-0 as 0).
fn score_prefix(score: f64) -> u64 {
    let bits = if score == 0.0 { 0 } else { score.to_bits() };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The `by_score` key of a member.
fn score_key(score: f64, member: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(8 + member.len());
    key.extend_from_slice(&score_prefix(score).to_be_bytes());
    key.extend_from_slice(member);
    key
}

fn score_value(score: f64) -> [u8; 8] {
    score.to_bits().to_le_bytes()
}

fn read_score(v: &[u8]) -> Result<f64> {
    let b: [u8; 8] = v.try_into().map_err(|_| Error::BadValue)?;
    let s = f64::from_bits(u64::from_le_bytes(b));
    if s.is_nan() {
        return Err(Error::BadValue);
    }
    Ok(s)
}

/// Borrowed (key, value) pairs for [`Tree::build`].
fn pairs(v: &[(Vec<u8>, [u8; 8])]) -> impl Iterator<Item = (&[u8], &[u8])> {
    v.iter().map(|(k, s)| (k.as_slice(), &s[..]))
}

/// A `by_score` item as (member, score).
fn scored(k: &[u8], v: &[u8]) -> Result<Scored> {
    Ok((unhashed(k).to_vec(), read_score(v)?))
}

impl Collection for ZSet {
    const TYPE: ValueType = ValueType::ZSet;
    const KEYED: &'static [bool] = &[true, true];

    fn empty() -> Self {
        ZSet::default()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        if tag != TAG_ITEMS {
            return Err(Error::BadValue);
        }
        // The members stay in a copy of the value's bytes (no allocation
        // per member); members added later go after them.
        let mut sorted = Sorted {
            items: Vec::with_capacity(n),
            arena: bytes.to_vec(),
        };
        for _ in 0..n {
            let score = f64::from_bits(r.u64()?);
            let member = r.span()?;
            let in_order = sorted.items.last().is_none_or(|last| {
                order(
                    (last.score, sorted.member(last)),
                    (score, &bytes[member.clone()]),
                ) == Ordering::Less
            });
            if score.is_nan() || !in_order {
                return Err(Error::BadValue);
            }
            sorted.items.push(Item {
                score,
                start: member.start,
                len: member.len(),
            });
        }
        r.finish()?;
        Ok(ZSet {
            body: Body::Compact { sorted },
            changed: false,
            journal: Journal::default(),
        })
    }

    fn encode_image(&self, out: &mut Vec<u8>) -> Result<()> {
        if let Body::Compact { .. } = &self.body {
            self.encode(out);
            return Ok(());
        }
        let all = self.range(0, self.len())?;
        codec::header(out, TAG_ITEMS, all.len());
        for (member, score) in &all {
            out.extend_from_slice(&score.to_bits().to_le_bytes());
            codec::put_bytes(out, member);
        }
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if let Body::Compact { sorted, .. } = &self.body {
            codec::header(out, TAG_ITEMS, sorted.len());
            for (score, member) in sorted.iter() {
                out.extend_from_slice(&score.to_bits().to_le_bytes());
                codec::put_bytes(out, member);
            }
        }
    }

    fn len(&self) -> u64 {
        match &self.body {
            Body::Compact { sorted, .. } => sorted.len() as u64,
            Body::Paged { by_score, .. } => by_score.len(),
        }
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        let Body::Compact { sorted, .. } = &self.body else {
            return "skiplist";
        };
        let small = sorted.len() <= LISTPACK_ENTRIES
            && sorted.iter().all(|(_, m)| m.len() <= LISTPACK_VALUE);
        if small {
            "listpack"
        } else {
            "skiplist"
        }
    }

    fn from_trees(mut trees: Vec<Tree>) -> Result<Self> {
        let by_member = trees.pop().ok_or(Error::BadValue)?;
        let by_score = trees.pop().ok_or(Error::BadValue)?;
        Ok(ZSet {
            body: Body::Paged {
                by_score,
                by_member,
                moved: None,
            },
            changed: false,
            journal: Journal::default(),
        })
    }

    fn settle(&mut self, seg: &Segment) -> Result<()> {
        match &mut self.body {
            Body::Compact { sorted, .. } => {
                let bytes: usize = sorted.iter().map(|(_, m)| m.len() + 8).sum();
                if sorted.len() > COMPACT_ITEMS || bytes > COMPACT_BYTES {
                    let by_score: Vec<(Vec<u8>, [u8; 8])> = sorted
                        .iter()
                        .map(|(s, m)| (score_key(s, m), score_value(s)))
                        .collect();
                    let mut by_member: Vec<(Vec<u8>, [u8; 8])> = sorted
                        .iter()
                        .map(|(s, m)| (hashed_key(m), score_value(s)))
                        .collect();
                    by_member.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    self.body = Body::Paged {
                        by_score: Tree::build(seg.0.clone(), true, pairs(&by_score)),
                        by_member: Tree::build(seg.0.clone(), true, pairs(&by_member)),
                        moved: None,
                    };
                }
            }
            Body::Paged { by_score, .. } => {
                if by_score.len() as usize <= COMPACT_ITEMS / 2 {
                    let mut sorted = Sorted::default();
                    for (k, v) in by_score.items()? {
                        sorted.push(read_score(&v)?, unhashed(&k));
                    }
                    if sorted.iter().map(|(_, m)| m.len() + 8).sum::<usize>() <= COMPACT_BYTES / 2 {
                        self.body = Body::Compact { sorted };
                    }
                }
            }
        }
        Ok(())
    }

    fn trees_mut(&mut self) -> Vec<&mut Tree> {
        match &mut self.body {
            Body::Compact { .. } => Vec::new(),
            Body::Paged {
                by_score,
                by_member,
                ..
            } => vec![by_score, by_member],
        }
    }

    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }
}

/// Makes a waiting in-place score change (`moved`) by copying, before
/// any other change to `by_member`.
fn settle_moved(by_member: &mut Tree, moved: &mut Option<(Vec<u8>, f64)>) -> Result<()> {
    if let Some((member, score)) = moved.take() {
        by_member.cancel_overwrite();
        by_member.put_key(&hashed_key(&member), &score_value(score))?;
    }
    Ok(())
}

/// One member of a [`Sorted`]: its score and where its bytes are.
#[derive(Clone, Copy, Debug)]
struct Item {
    score: f64,
    start: usize,
    len: usize,
}

/// A compact sorted set while open: its members in (score, member) order,
/// their bytes in one buffer. A removed member's bytes stay in the buffer
/// until the value is written (it lives for one command).
#[derive(Clone, Debug, Default)]
struct Sorted {
    items: Vec<Item>,
    arena: Vec<u8>,
}

impl Sorted {
    fn len(&self) -> usize {
        self.items.len()
    }

    fn member(&self, item: &Item) -> &[u8] {
        self.arena
            .get(item.start..item.start + item.len)
            .unwrap_or(&[])
    }

    fn iter(&self) -> impl Iterator<Item = (f64, &[u8])> + '_ {
        self.items.iter().map(|it| (it.score, self.member(it)))
    }

    fn get(&self, i: usize) -> Option<(f64, &[u8])> {
        self.items.get(i).map(|it| (it.score, self.member(it)))
    }

    fn position(&self, score: f64, member: &[u8]) -> std::result::Result<usize, usize> {
        self.items
            .binary_search_by(|it| order((it.score, self.member(it)), (score, member)))
    }

    fn partition_point(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        self.items
            .partition_point(|it| pred(it.score, self.member(it)))
    }

    fn item(&mut self, score: f64, member: &[u8]) -> Item {
        let start = self.arena.len();
        self.arena.extend_from_slice(member);
        Item {
            score,
            start,
            len: member.len(),
        }
    }

    fn push(&mut self, score: f64, member: &[u8]) {
        let item = self.item(score, member);
        self.items.push(item);
    }

    fn insert(&mut self, at: usize, score: f64, member: &[u8]) {
        let item = self.item(score, member);
        self.items.insert(at, item);
    }
}

impl ZSet {
    /// A copy held wholly in process memory: it stays valid after the
    /// read that made it, when a paged original may change.
    pub fn detached(&self) -> Result<ZSet> {
        let sorted = match &self.body {
            Body::Compact { sorted, .. } => sorted.clone(),
            Body::Paged { .. } => {
                let mut sorted = Sorted::default();
                for (m, s) in self.range(0, self.len())? {
                    sorted.push(s, &m);
                }
                sorted
            }
        };
        Ok(ZSet {
            body: Body::Compact { sorted },
            changed: false,
            journal: Journal::default(),
        })
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Result<Option<f64>> {
        match &self.body {
            Body::Compact { sorted } => {
                Ok(sorted.iter().find(|(_, m)| *m == member).map(|(s, _)| s))
            }
            Body::Paged {
                moved: Some((m, s)),
                ..
            } if m.as_slice() == member => Ok(Some(*s)),
            Body::Paged { by_member, .. } => by_member
                .get(&hashed_key(member))?
                .map(|v| read_score(&v))
                .transpose(),
        }
    }

    /// Adds `member` or moves it to `score`; returns its previous score.
    /// A NaN score is refused (`NotFloat` is the caller's to report first).
    pub fn insert(&mut self, member: &[u8], score: f64) -> Result<Option<f64>> {
        if score.is_nan() {
            return Err(Error::BadValue);
        }
        let old = self.score(member)?;
        self.set_score(member, score, old)
    }

    /// [`insert`](Self::insert) for a caller that has just read the
    /// member's score (`old`, from [`score`](Self::score) in this command):
    /// ZADD reads it to decide, and a second lookup of the member would
    /// cost as much again.
    pub fn set_score(
        &mut self,
        member: &[u8],
        score: f64,
        old: Option<f64>,
    ) -> Result<Option<f64>> {
        if score.is_nan() {
            return Err(Error::BadValue);
        }
        if let Some(old) = old {
            if old.to_bits() == score.to_bits() {
                return Ok(Some(old));
            }
        }
        match &mut self.body {
            Body::Compact { sorted } => {
                if let Some(old) = old {
                    if let Ok(i) = sorted.position(old, member) {
                        sorted.items.remove(i);
                    }
                }
                let at = sorted.position(score, member).unwrap_or_else(|i| i);
                sorted.insert(at, score, member);
            }
            Body::Paged {
                by_score,
                by_member,
                moved,
            } => {
                if let Some(old) = old {
                    by_score.remove_present(&score_key(old, member))?;
                }
                by_score.put_key(&score_key(score, member), &score_value(score))?;
                settle_moved(by_member, moved)?;
                // A score change leaves the member's entry as long as it
                // was: set in place, its leaf is not copied.
                let key = hashed_key(member);
                if old.is_some() && by_member.overwrite(&key, &score_value(score))? {
                    *moved = Some((member.to_vec(), score));
                } else {
                    by_member.put_key(&key, &score_value(score))?;
                }
            }
        }
        self.changed = true;
        self.journal.zset_add(member, score);
        Ok(old)
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> Result<bool> {
        let Some(score) = self.score(member)? else {
            return Ok(false);
        };
        match &mut self.body {
            Body::Compact { sorted } => {
                if let Ok(i) = sorted.position(score, member) {
                    sorted.items.remove(i);
                }
            }
            Body::Paged {
                by_score,
                by_member,
                moved,
            } => {
                settle_moved(by_member, moved)?;
                by_member.remove_present(&hashed_key(member))?;
                by_score.remove_present(&score_key(score, member))?;
            }
        }
        self.changed = true;
        self.journal.zset_rem(member);
        Ok(true)
    }

    /// The 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Result<Option<u64>> {
        let Some(score) = self.score(member)? else {
            return Ok(None);
        };
        match &self.body {
            Body::Compact { sorted, .. } => {
                Ok(sorted.position(score, member).ok().map(|i| i as u64))
            }
            Body::Paged { by_score, .. } => by_score.rank_of(&score_key(score, member)),
        }
    }

    /// The member and score at `rank`.
    pub fn nth(&self, rank: u64) -> Result<Option<Scored>> {
        match &self.body {
            Body::Compact { sorted, .. } => Ok(usize::try_from(rank)
                .ok()
                .and_then(|i| sorted.get(i))
                .map(|(s, m)| (m.to_vec(), s))),
            Body::Paged { by_score, .. } => {
                by_score.nth(rank)?.map(|(k, v)| scored(&k, &v)).transpose()
            }
        }
    }

    /// Members and scores with ranks in `start..end` (clamped), ascending.
    pub fn range(&self, start: u64, end: u64) -> Result<Vec<Scored>> {
        let len = self.len();
        let (start, end) = (start.min(len), end.min(len));
        if start >= end {
            return Ok(Vec::new());
        }
        match &self.body {
            Body::Compact { sorted, .. } => Ok(sorted
                .iter()
                .skip(start as usize)
                .take((end - start) as usize)
                .map(|(s, m)| (m.to_vec(), s))
                .collect()),
            Body::Paged { by_score, .. } => {
                let mut out = Vec::with_capacity((end - start) as usize);
                let mut bad = false;
                by_score.visit(start, end, false, &mut |k, v| match scored(k, v) {
                    Ok(x) => {
                        out.push(x);
                        true
                    }
                    Err(_) => {
                        bad = true;
                        false
                    }
                })?;
                if bad {
                    return Err(Error::BadValue);
                }
                Ok(out)
            }
        }
    }

    /// How many members score below `score` (at or below it when
    /// `inclusive`): the rank where a score range starts or ends.
    pub fn count_below_score(&self, score: f64, inclusive: bool) -> Result<u64> {
        match &self.body {
            Body::Compact { sorted, .. } => {
                Ok(
                    sorted.partition_point(|s, _| if inclusive { s <= score } else { s < score })
                        as u64,
                )
            }
            Body::Paged { by_score, .. } => {
                let prefix = score_prefix(score);
                match (inclusive, prefix.checked_add(1)) {
                    (false, _) => by_score.count_below(&prefix.to_be_bytes(), false),
                    (true, Some(next)) => by_score.count_below(&next.to_be_bytes(), false),
                    (true, None) => Ok(by_score.len()),
                }
            }
        }
    }

    /// How many members sort before `member` (at or before it when
    /// `inclusive`), for lexicographic ranges; meaningful, as in Redis, when
    /// every member has the same score.
    pub fn count_below_lex(&self, member: &[u8], inclusive: bool) -> Result<u64> {
        match &self.body {
            Body::Compact { sorted, .. } => {
                Ok(
                    sorted.partition_point(|_, m| if inclusive { m <= member } else { m < member })
                        as u64,
                )
            }
            Body::Paged { by_score, .. } => {
                let Some((_, first)) = self.nth(0)? else {
                    return Ok(0);
                };
                by_score.count_below(&score_key(first, member), inclusive)
            }
        }
    }

    /// Removes the members with ranks in `start..end`; returns how many.
    pub fn remove_range(&mut self, start: u64, end: u64) -> Result<u64> {
        let len = self.len();
        let (start, end) = (start.min(len), end.min(len));
        if start >= end {
            return Ok(0);
        }
        let doomed = self.range(start, end)?;
        match &mut self.body {
            Body::Compact { sorted } => {
                sorted.items.drain(start as usize..end as usize);
            }
            Body::Paged {
                by_score,
                by_member,
                moved,
            } => {
                settle_moved(by_member, moved)?;
                by_score.remove_range(start, end)?;
                for (m, _) in &doomed {
                    by_member.remove_present(&hashed_key(m))?;
                }
            }
        }
        // ZPOPMIN and ZREMRANGEBY… remove these members, whatever their
        // ranks are on replay.
        for (m, _) in &doomed {
            self.journal.zset_rem(m);
        }
        self.changed = true;
        Ok(end - start)
    }

    /// One ZSCAN step (see [`super::Hash::scan`]).
    pub fn scan(&self, cursor: u64, count: u64) -> Result<(u64, Vec<Scored>)> {
        match &self.body {
            Body::Compact { .. } => Ok((0, self.range(0, self.len())?)),
            Body::Paged {
                by_member, moved, ..
            } => {
                let (next, items) = scan_tree(by_member, cursor, count)?;
                let items = items
                    .into_iter()
                    .map(|(k, v)| match moved {
                        Some((m, s)) if m.as_slice() == unhashed(&k) => Ok((m.clone(), *s)),
                        _ => scored(&k, &v),
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok((next, items))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reopened(z: &ZSet) -> ZSet {
        let mut out = Vec::new();
        z.encode(&mut out);
        ZSet::decode(&out).unwrap()
    }

    fn all(z: &ZSet) -> Vec<(String, f64)> {
        z.range(0, z.len())
            .unwrap()
            .into_iter()
            .map(|(m, s)| (String::from_utf8(m).unwrap(), s))
            .collect()
    }

    #[test]
    fn compact_edits_keep_the_order_across_reopening() {
        let mut z = ZSet::empty();
        for (m, s) in [("c", 3.0), ("a", 1.0), ("b", 2.0), ("bb", 2.0)] {
            assert_eq!(z.insert(m.as_bytes(), s).unwrap(), None);
        }
        let mut z = reopened(&z);
        // Members read from the value's bytes and added after them mix.
        assert_eq!(z.insert(b"a", 4.0).unwrap(), Some(1.0));
        assert_eq!(z.insert(b"d", 0.5).unwrap(), None);
        assert!(z.remove(b"bb").unwrap());
        assert!(!z.remove(b"bb").unwrap());
        let want = [("d", 0.5), ("b", 2.0), ("c", 3.0), ("a", 4.0)];
        let want: Vec<_> = want.iter().map(|(m, s)| (m.to_string(), *s)).collect();
        assert_eq!(all(&z), want);
        assert_eq!(z.rank(b"c").unwrap(), Some(2));
        assert_eq!(z.score(b"a").unwrap(), Some(4.0));
        assert_eq!(z.nth(1).unwrap(), Some((b"b".to_vec(), 2.0)));
        assert_eq!(z.count_below_score(3.0, true).unwrap(), 3);
        assert_eq!(z.count_below_score(3.0, false).unwrap(), 2);
        assert_eq!(all(&z.detached().unwrap()), want);
        let mut z = reopened(&z);
        assert_eq!(all(&z), want);
        assert_eq!(z.remove_range(0, 2).unwrap(), 2);
        assert_eq!(all(&reopened(&z)), want[2..].to_vec());
    }

    #[test]
    fn damaged_compact_bytes_are_refused_or_read_without_panic() {
        let mut z = ZSet::empty();
        for i in 0..10u8 {
            z.insert(&[b'm', i], f64::from(i)).unwrap();
        }
        let mut out = Vec::new();
        z.encode(&mut out);
        for at in 0..out.len() {
            for byte in [0u8, 0x7f, 0x80, 0xff] {
                let mut bad = out.clone();
                bad[at] = byte;
                if let Ok(z) = ZSet::decode(&bad) {
                    let _ = all_lossy(&z);
                }
                let _ = ZSet::decode(&bad[..at]);
            }
        }
    }

    fn all_lossy(z: &ZSet) -> usize {
        z.range(0, z.len()).map(|v| v.len()).unwrap_or(0)
    }
}
