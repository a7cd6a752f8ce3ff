//! Sorted sets.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::codec::{self, Reader, TAG_ITEMS};
use super::{Collection, Scored};
use crate::entry::ValueType;
use crate::error::{Error, Result};

/// Redis 7.0's `zset-max-listpack-entries` / `-value` defaults.
const LISTPACK_ENTRIES: usize = 128;
const LISTPACK_VALUE: usize = 64;

/// A sorted set: members ordered by (score, member bytes), as Redis orders
/// them. Ranks are 0-based in that order. Scores are never NaN.
#[derive(Clone, Debug, Default)]
pub struct ZSet {
    sorted: Vec<(f64, Vec<u8>)>,
    scores: HashMap<Vec<u8>, f64>,
    changed: bool,
}

fn order(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a.1.cmp(b.1))
}

impl Collection for ZSet {
    const TYPE: ValueType = ValueType::ZSet;

    fn empty() -> Self {
        ZSet::default()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let (mut r, tag, n) = Reader::open(bytes)?;
        if tag != TAG_ITEMS {
            return Err(Error::BadValue);
        }
        let mut z = ZSet {
            sorted: Vec::with_capacity(n),
            scores: HashMap::with_capacity(n),
            changed: false,
        };
        for _ in 0..n {
            let score = f64::from_bits(r.u64()?);
            let member = r.bytes()?;
            let in_order = z
                .sorted
                .last()
                .is_none_or(|(s, m)| order((*s, m), (score, &member)) == Ordering::Less);
            if score.is_nan() || !in_order {
                return Err(Error::BadValue);
            }
            z.scores.insert(member.clone(), score);
            z.sorted.push((score, member));
        }
        r.finish()?;
        Ok(z)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        codec::header(out, TAG_ITEMS, self.sorted.len());
        for (score, member) in &self.sorted {
            out.extend_from_slice(&score.to_bits().to_le_bytes());
            codec::put_bytes(out, member);
        }
    }

    fn len(&self) -> u64 {
        self.sorted.len() as u64
    }

    fn changed(&self) -> bool {
        self.changed
    }

    fn encoding_name(&self) -> &'static str {
        let small = self.sorted.len() <= LISTPACK_ENTRIES
            && self.sorted.iter().all(|(_, m)| m.len() <= LISTPACK_VALUE);
        if small {
            "listpack"
        } else {
            "skiplist"
        }
    }
}

impl ZSet {
    fn position(&self, score: f64, member: &[u8]) -> std::result::Result<usize, usize> {
        self.sorted
            .binary_search_by(|(s, m)| order((*s, m), (score, member)))
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Result<Option<f64>> {
        Ok(self.scores.get(member).copied())
    }

    /// Adds `member` or moves it to `score`; returns its previous score.
    /// A NaN score is refused (`NotFloat` is the caller's to report first).
    pub fn insert(&mut self, member: &[u8], score: f64) -> Result<Option<f64>> {
        if score.is_nan() {
            return Err(Error::BadValue);
        }
        let old = self.scores.get(member).copied();
        if let Some(old) = old {
            if old.to_bits() == score.to_bits() {
                return Ok(Some(old));
            }
            if let Ok(i) = self.position(old, member) {
                self.sorted.remove(i);
            }
        }
        let at = self.position(score, member).unwrap_or_else(|i| i);
        self.sorted.insert(at, (score, member.to_vec()));
        self.scores.insert(member.to_vec(), score);
        self.changed = true;
        Ok(old)
    }

    /// Removes `member`; true when it was there.
    pub fn remove(&mut self, member: &[u8]) -> Result<bool> {
        let Some(score) = self.scores.remove(member) else {
            return Ok(false);
        };
        if let Ok(i) = self.position(score, member) {
            self.sorted.remove(i);
        }
        self.changed = true;
        Ok(true)
    }

    /// The 0-based rank of `member` in ascending order.
    pub fn rank(&self, member: &[u8]) -> Result<Option<u64>> {
        Ok(self
            .scores
            .get(member)
            .and_then(|&s| self.position(s, member).ok())
            .map(|i| i as u64))
    }

    /// The member and score at `rank`.
    pub fn nth(&self, rank: u64) -> Result<Option<Scored>> {
        Ok(usize::try_from(rank)
            .ok()
            .and_then(|i| self.sorted.get(i))
            .map(|(s, m)| (m.clone(), *s)))
    }

    /// Members and scores with ranks in `start..end` (clamped), ascending.
    pub fn range(&self, start: u64, end: u64) -> Result<Vec<Scored>> {
        let len = self.len();
        let (start, end) = (start.min(len) as usize, end.min(len) as usize);
        Ok(self.sorted[start..end.max(start)]
            .iter()
            .map(|(s, m)| (m.clone(), *s))
            .collect())
    }

    /// How many members score below `score` (at or below it when
    /// `inclusive`): the rank where a score range starts or ends.
    pub fn count_below_score(&self, score: f64, inclusive: bool) -> Result<u64> {
        Ok(self
            .sorted
            .partition_point(|(s, _)| if inclusive { *s <= score } else { *s < score })
            as u64)
    }

    /// How many members sort before `member` (at or before it when
    /// `inclusive`), for lexicographic ranges; meaningful, as in Redis, when
    /// every member has the same score.
    pub fn count_below_lex(&self, member: &[u8], inclusive: bool) -> Result<u64> {
        Ok(self.sorted.partition_point(|(_, m)| {
            if inclusive {
                m.as_slice() <= member
            } else {
                m.as_slice() < member
            }
        }) as u64)
    }

    /// Removes the members with ranks in `start..end`; returns how many.
    pub fn remove_range(&mut self, start: u64, end: u64) -> Result<u64> {
        let len = self.len();
        let (start, end) = (start.min(len) as usize, end.min(len) as usize);
        if start >= end {
            return Ok(0);
        }
        for (_, m) in self.sorted.drain(start..end) {
            self.scores.remove(&m);
        }
        self.changed = true;
        Ok((end - start) as u64)
    }

    /// One ZSCAN step (see [`super::Hash::scan`]).
    pub fn scan(&self, _cursor: u64, _count: u64) -> Result<(u64, Vec<Scored>)> {
        Ok((0, self.range(0, self.len())?))
    }
}
