//! Subscription tables: one per worker slot, written only by that slot's
//! worker and read by every publisher, so that a message goes to exactly the
//! workers that have a subscriber for it and PUBLISH can count receivers
//! across processes.
//!
//! A table holds channel (and shard channel, and key) subscriptions as open
//! addressing entries {hash u64, count u32, kind u32}, the count being the
//! number of that worker's clients subscribed. An entry whose count drops to
//! 0 stays as a tombstone that a later insert may reuse, so a probe chain
//! never breaks under a reader; the whole table is cleared only when the
//! worker's last subscription goes. Patterns are few: they live as records
//! after the entries, rewritten whole under a seqlock.
//!
//! The 64-bit hash stands for the name: two names with the same hash on one
//! worker would send a message to a worker with no subscriber for it (which
//! compares names in full and drops it) and make PUBLISH count a few too
//! many. With xxh3 that takes about 4 billion channels on one worker to be
//! likely.
//!
//! Bits in the header say which slots have any subscription, any key
//! subscription and any MONITOR client. The key bits pair with a write the
//! way the waiter table does (I14): the subscriber adds its entry (SeqCst)
//! before it reads the key; the writer publishes its write before it reads
//! the bits and entries ([`Store::key_subscribers`]).

use std::sync::atomic::{fence, Ordering};

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::error::{Error, Result};
use crate::ipc::waiters::slot_bit;
use crate::segment::layout::*;
use crate::store::Store;

/// What a table entry or pattern subscribes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubKind {
    /// A channel (SUBSCRIBE) or, for a pattern, channels (PSUBSCRIBE).
    Channel,
    /// A shard channel (SSUBSCRIBE): a namespace of its own.
    Shard,
    /// A key of a db (key subscriptions with values).
    Key(u8),
    /// A NATS queue group, as a pattern record: its name is the subject
    /// (wildcards allowed), a space, then the group; its count is the
    /// worker's members. A publisher picks one member over every worker.
    Queue,
}

impl SubKind {
    fn code(self) -> u32 {
        match self {
            SubKind::Channel => 1,
            SubKind::Shard => 2,
            SubKind::Key(db) => 3 | (db as u32) << 8,
            SubKind::Queue => 4,
        }
    }

    fn from_code(code: u32) -> Option<SubKind> {
        match code & 0xff {
            1 => Some(SubKind::Channel),
            2 => Some(SubKind::Shard),
            3 => Some(SubKind::Key((code >> 8) as u8)),
            4 => Some(SubKind::Queue),
            _ => None,
        }
    }

    fn is_key(self) -> bool {
        matches!(self, SubKind::Key(_))
    }
}

/// One pattern subscription of a worker, as a publisher reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternSub {
    /// Channel patterns or key patterns (of a db).
    pub kind: SubKind,
    /// The worker's clients subscribed to it.
    pub count: u32,
    /// The glob.
    pub pattern: Vec<u8>,
}

/// What a slot's table says about one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receivers {
    /// This many of the slot's clients subscribe to it (may be 0).
    Exactly(u32),
    /// The table overflowed: the slot must get every message and counts
    /// its receivers itself.
    Unknown,
}

/// Words of a table's header besides the layout's: totals kept by the owner.
const PS_TOTAL: u64 = 24;
const PS_KEY_TOTAL: u64 = 32;
const PAT_HEADER: u64 = 16;

fn name_hash(kind: SubKind, name: &[u8]) -> u64 {
    xxh3_64_with_seed(name, 0x5ab5_0000 ^ kind.code() as u64).max(1)
}

impl Store {
    fn table(&self, slot: u32) -> Result<u64> {
        slot_bit(slot)?;
        let geo = &self.sh.geo;
        Ok(geo.ps_off + slot as u64 * geo.ps_size)
    }

    fn pattern_area(&self) -> (u64, u64) {
        let geo = &self.sh.geo;
        let start = PS_ENTRIES + geo.ps_cap * PS_ENTRY;
        (start, geo.ps_size - start)
    }

    /// Slots whose tables hold any subscription (bit per slot).
    pub fn pubsub_slots(&self) -> Result<u32> {
        Ok(self.sh.region.a32(H_PUBSUB_SLOTS)?.load(Ordering::SeqCst))
    }

    /// Adds `delta` to `slot`'s count of clients subscribed to `name` (call
    /// it from the slot's worker only). A key subscription is visible to
    /// writers when this returns (I14): read the key after it.
    pub fn subscription_add(
        &self,
        slot: u32,
        kind: SubKind,
        name: &[u8],
        delta: i64,
    ) -> Result<()> {
        let t = self.table(slot)?;
        let r = &self.sh.region;
        let cap = self.sh.geo.ps_cap;
        let hash = name_hash(kind, name);
        let code = kind.code();
        let home = hash % cap;
        let mut reusable = None;
        let mut found = None;
        for i in 0..cap {
            let pos = (home + i) % cap;
            let e = t + PS_ENTRIES + pos * PS_ENTRY;
            let h = r.a64(e)?.load(Ordering::Acquire);
            if h == 0 {
                reusable = reusable.or(Some(pos));
                break;
            }
            let count = r.a32(e + 8)?.load(Ordering::Relaxed);
            if h == hash && r.a32(e + 12)?.load(Ordering::Relaxed) == code {
                found = Some(pos);
                break;
            }
            if count == 0 && reusable.is_none() {
                reusable = Some(pos);
            }
        }
        if let Some(pos) = found {
            let e = t + PS_ENTRIES + pos * PS_ENTRY;
            let count = r.a32(e + 8)?.load(Ordering::Relaxed) as i64;
            let new = (count + delta).clamp(0, u32::MAX as i64) as u32;
            r.a32(e + 8)?.store(new, Ordering::SeqCst);
        } else if delta > 0 {
            match reusable {
                Some(pos) => {
                    let e = t + PS_ENTRIES + pos * PS_ENTRY;
                    if r.a64(e)?.load(Ordering::Relaxed) == 0 {
                        r.a32(t + PS_USED)?.fetch_add(1, Ordering::Relaxed);
                    }
                    // Count 0 first: a reader that sees the new hash sees at
                    // worst a subscription not yet counted.
                    r.a32(e + 8)?.store(0, Ordering::Release);
                    r.a32(e + 12)?.store(code, Ordering::Release);
                    r.a64(e)?.store(hash, Ordering::Release);
                    r.a32(e + 8)?
                        .store(delta.min(u32::MAX as i64) as u32, Ordering::SeqCst);
                }
                None => r.a32(t + PS_OVERFLOW)?.store(1, Ordering::SeqCst),
            }
        }
        self.add_totals(slot, kind, delta)
    }

    /// Moves the slot's totals and its bits in the header masks; clears the
    /// whole table when its last subscription goes.
    fn add_totals(&self, slot: u32, kind: SubKind, delta: i64) -> Result<()> {
        let t = self.table(slot)?;
        let r = &self.sh.region;
        let bit = slot_bit(slot)?;
        let total = r.a64(t + PS_TOTAL)?;
        let now = (total.load(Ordering::Relaxed) as i64 + delta).max(0) as u64;
        total.store(now, Ordering::Relaxed);
        if kind.is_key() {
            let keys = r.a64(t + PS_KEY_TOTAL)?;
            let k = (keys.load(Ordering::Relaxed) as i64 + delta).max(0) as u64;
            keys.store(k, Ordering::Relaxed);
            let mask = r.a32(H_KEYSUB_SLOTS)?;
            if k > 0 {
                mask.fetch_or(bit, Ordering::SeqCst);
            } else {
                mask.fetch_and(!bit, Ordering::SeqCst);
            }
        }
        let mask = r.a32(H_PUBSUB_SLOTS)?;
        if now > 0 {
            mask.fetch_or(bit, Ordering::SeqCst);
        } else {
            mask.fetch_and(!bit, Ordering::SeqCst);
            self.clear_entries(t)?;
        }
        // A subscriber reads the key (or its retained value) only after this.
        fence(Ordering::SeqCst);
        Ok(())
    }

    fn clear_entries(&self, t: u64) -> Result<()> {
        let r = &self.sh.region;
        for pos in 0..self.sh.geo.ps_cap {
            r.a64(t + PS_ENTRIES + pos * PS_ENTRY)?
                .store(0, Ordering::Relaxed);
        }
        r.a32(t + PS_USED)?.store(0, Ordering::Relaxed);
        r.a32(t + PS_OVERFLOW)?.store(0, Ordering::Release);
        Ok(())
    }

    /// How many of `slot`'s clients subscribe to `name`.
    pub fn subscribers(&self, slot: u32, kind: SubKind, name: &[u8]) -> Result<Receivers> {
        let t = self.table(slot)?;
        let r = &self.sh.region;
        if r.a32(t + PS_OVERFLOW)?.load(Ordering::Acquire) != 0 {
            return Ok(Receivers::Unknown);
        }
        let cap = self.sh.geo.ps_cap;
        let hash = name_hash(kind, name);
        let code = kind.code();
        let home = hash % cap;
        for i in 0..cap {
            let e = t + PS_ENTRIES + ((home + i) % cap) * PS_ENTRY;
            let h = r.a64(e)?.load(Ordering::Acquire);
            if h == 0 {
                break;
            }
            if h == hash && r.a32(e + 12)?.load(Ordering::Acquire) == code {
                return Ok(Receivers::Exactly(r.a32(e + 8)?.load(Ordering::SeqCst)));
            }
        }
        Ok(Receivers::Exactly(0))
    }

    /// Appends the name hashes `slot`'s clients subscribe to with `kind` (for
    /// INFO's channel counts: distinct hashes over every slot).
    pub fn subscribed_hashes(&self, slot: u32, kind: SubKind, out: &mut Vec<u64>) -> Result<()> {
        let t = self.table(slot)?;
        let r = &self.sh.region;
        let code = kind.code();
        for pos in 0..self.sh.geo.ps_cap {
            let e = t + PS_ENTRIES + pos * PS_ENTRY;
            let h = r.a64(e)?.load(Ordering::Acquire);
            if h != 0
                && r.a32(e + 8)?.load(Ordering::Acquire) > 0
                && r.a32(e + 12)?.load(Ordering::Acquire) == code
            {
                out.push(h);
            }
        }
        Ok(())
    }

    /// The generation of `slot`'s pattern records (even; it moves with
    /// every change), so that a publisher can cache what it parsed.
    pub fn patterns_generation(&self, slot: u32) -> Result<u64> {
        let t = self.table(slot)?;
        Ok(self.sh.region.a64(t + PS_SEQ)?.load(Ordering::Acquire))
    }

    /// Reads `slot`'s pattern subscriptions into `out`; returns their
    /// generation.
    pub fn patterns(&self, slot: u32, out: &mut Vec<PatternSub>) -> Result<u64> {
        let t = self.table(slot)?;
        let r = &self.sh.region;
        let (start, room) = self.pattern_area();
        for _ in 0..10_000 {
            let seq = r.a64(t + PS_SEQ)?.load(Ordering::Acquire);
            if seq & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            out.clear();
            let bytes = (r.a32(t + PS_PAT_BYTES)?.load(Ordering::Acquire) as u64).min(room);
            let mut buf = Vec::new();
            r.read_bytes(t + start, bytes, &mut buf)?;
            fence(Ordering::Acquire);
            if r.a64(t + PS_SEQ)?.load(Ordering::Acquire) != seq {
                continue;
            }
            parse_patterns(&buf, out);
            return Ok(seq);
        }
        Err(Error::Corrupted(t + PS_SEQ))
    }

    /// Sets `slot`'s count for a pattern (0 removes it); call it from the
    /// slot's worker only. Returns false when the pattern area is full (the
    /// table is then marked overflowed: publishers send it everything).
    pub fn set_pattern(
        &self,
        slot: u32,
        kind: SubKind,
        pattern: &[u8],
        count: u32,
    ) -> Result<bool> {
        let t = self.table(slot)?;
        let r = &self.sh.region;
        let mut list = Vec::new();
        self.patterns(slot, &mut list)?;
        let old = list
            .iter()
            .position(|p| p.kind == kind && p.pattern == pattern);
        let before = old.map_or(0, |i| list[i].count) as i64;
        match (old, count) {
            (Some(i), 0) => {
                list.remove(i);
            }
            (Some(i), n) => list[i].count = n,
            (None, 0) => return Ok(true),
            (None, n) => list.push(PatternSub {
                kind,
                count: n,
                pattern: pattern.to_vec(),
            }),
        }
        let bytes = encode_patterns(&list);
        let (start, room) = self.pattern_area();
        let fits = bytes.len() as u64 <= room;
        let seq = r.a64(t + PS_SEQ)?;
        let s = seq.load(Ordering::Relaxed);
        seq.store(s | 1, Ordering::Release);
        fence(Ordering::Release);
        if fits {
            r.write_bytes(t + start, &bytes)?;
            r.a32(t + PS_PAT_BYTES)?
                .store(bytes.len() as u32, Ordering::Release);
            r.a32(t + PS_PAT_COUNT)?
                .store(list.len() as u32, Ordering::Release);
        } else {
            r.a32(t + PS_OVERFLOW)?.store(1, Ordering::SeqCst);
        }
        seq.store((s | 1) + 1, Ordering::Release);
        self.add_totals(slot, kind, count as i64 - before)?;
        Ok(fits)
    }

    /// Forgets every subscription of `slot`: its worker died or a new one
    /// takes the slot over, so no publisher routes to a ghost.
    pub fn pubsub_reset(&self, slot: u32) -> Result<()> {
        let t = self.table(slot)?;
        let r = &self.sh.region;
        let bit = slot_bit(slot)?;
        for mask in [H_PUBSUB_SLOTS, H_KEYSUB_SLOTS, H_MONITOR_SLOTS] {
            r.a32(mask)?.fetch_and(!bit, Ordering::SeqCst);
        }
        let seq = r.a64(t + PS_SEQ)?;
        let s = seq.load(Ordering::Relaxed);
        seq.store(s | 1, Ordering::Release);
        r.a32(t + PS_PAT_BYTES)?.store(0, Ordering::Release);
        r.a32(t + PS_PAT_COUNT)?.store(0, Ordering::Release);
        seq.store((s | 1) + 1, Ordering::Release);
        r.a64(t + PS_TOTAL)?.store(0, Ordering::Relaxed);
        r.a64(t + PS_KEY_TOTAL)?.store(0, Ordering::Relaxed);
        self.clear_entries(t)
    }

    /// Slots with key subscriptions: read it after a write (the fence orders
    /// the write before the read, I14).
    pub fn key_subscriber_slots(&self) -> Result<u32> {
        fence(Ordering::SeqCst);
        Ok(self.sh.region.a32(H_KEYSUB_SLOTS)?.load(Ordering::SeqCst))
    }

    /// Marks whether `slot` has MONITOR clients.
    pub fn set_monitoring(&self, slot: u32, on: bool) -> Result<()> {
        let bit = slot_bit(slot)?;
        let mask = self.sh.region.a32(H_MONITOR_SLOTS)?;
        if on {
            mask.fetch_or(bit, Ordering::SeqCst);
        } else {
            mask.fetch_and(!bit, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Slots with MONITOR clients (bit per slot).
    pub fn monitor_slots(&self) -> Result<u32> {
        Ok(self.sh.region.a32(H_MONITOR_SLOTS)?.load(Ordering::Relaxed))
    }
}

fn encode_patterns(list: &[PatternSub]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in list {
        out.extend_from_slice(&(p.pattern.len() as u32).to_le_bytes());
        out.extend_from_slice(&p.count.to_le_bytes());
        out.extend_from_slice(&p.kind.code().to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&p.pattern);
        out.resize(out.len().next_multiple_of(8), 0);
    }
    out
}

/// Parses pattern records, stopping at the first that does not fit (the
/// bytes come from shared memory: I1).
fn parse_patterns(buf: &[u8], out: &mut Vec<PatternSub>) {
    let mut at = 0usize;
    let word = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
    while at + PAT_HEADER as usize <= buf.len() {
        let len = word(at) as usize;
        let count = word(at + 4);
        let Some(kind) = SubKind::from_code(word(at + 8)) else {
            return;
        };
        let body = at + PAT_HEADER as usize;
        let Some(end) = body.checked_add(len).filter(|&e| e <= buf.len()) else {
            return;
        };
        out.push(PatternSub {
            kind,
            count,
            pattern: buf[body..end].to_vec(),
        });
        at = end.next_multiple_of(8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{Location, OpenOptions};

    fn store(tag: &str) -> Store {
        let path = std::env::temp_dir().join(format!("shoal-pubsub-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let s = Store::open(&OpenOptions {
            location: Location::Path(path.clone()),
            size: 8 << 20,
            ..OpenOptions::default()
        })
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        s
    }

    #[test]
    fn counts_are_per_slot_kind_and_name() {
        let s = store("counts");
        assert_eq!(s.pubsub_slots().unwrap(), 0);
        s.subscription_add(2, SubKind::Channel, b"news", 1).unwrap();
        s.subscription_add(2, SubKind::Channel, b"news", 1).unwrap();
        s.subscription_add(5, SubKind::Channel, b"news", 1).unwrap();
        assert_eq!(s.pubsub_slots().unwrap(), 1 << 2 | 1 << 5);
        let n = |slot, kind, name: &[u8]| s.subscribers(slot, kind, name).unwrap();
        assert_eq!(n(2, SubKind::Channel, b"news"), Receivers::Exactly(2));
        assert_eq!(n(5, SubKind::Channel, b"news"), Receivers::Exactly(1));
        assert_eq!(n(2, SubKind::Shard, b"news"), Receivers::Exactly(0));
        assert_eq!(n(2, SubKind::Channel, b"other"), Receivers::Exactly(0));
        s.subscription_add(2, SubKind::Key(3), b"k", 1).unwrap();
        assert_eq!(n(2, SubKind::Key(3), b"k"), Receivers::Exactly(1));
        assert_eq!(n(2, SubKind::Key(0), b"k"), Receivers::Exactly(0));
        let mut hashes = Vec::new();
        s.subscribed_hashes(2, SubKind::Channel, &mut hashes)
            .unwrap();
        s.subscribed_hashes(5, SubKind::Channel, &mut hashes)
            .unwrap();
        hashes.dedup();
        assert_eq!(hashes.len(), 1);
        assert_eq!(s.key_subscriber_slots().unwrap(), 1 << 2);
        s.subscription_add(2, SubKind::Key(3), b"k", -1).unwrap();
        assert_eq!(s.key_subscriber_slots().unwrap(), 0);
        s.subscription_add(2, SubKind::Channel, b"news", -2)
            .unwrap();
        assert_eq!(n(2, SubKind::Channel, b"news"), Receivers::Exactly(0));
        assert_eq!(s.pubsub_slots().unwrap(), 1 << 5);
        s.pubsub_reset(5).unwrap();
        assert_eq!(s.pubsub_slots().unwrap(), 0);
        assert_eq!(n(5, SubKind::Channel, b"news"), Receivers::Exactly(0));
    }

    #[test]
    fn tombstones_are_reused_and_overflow_is_reported() {
        let s = store("overflow");
        let cap = s.sh.geo.ps_cap;
        // Keep one subscription so the table is never cleared as a whole.
        s.subscription_add(0, SubKind::Channel, b"keep", 1).unwrap();
        for round in 0..3 {
            for i in 0..cap / 2 {
                let name = format!("c{round}-{i}");
                s.subscription_add(0, SubKind::Channel, name.as_bytes(), 1)
                    .unwrap();
                s.subscription_add(0, SubKind::Channel, name.as_bytes(), -1)
                    .unwrap();
            }
        }
        assert_eq!(
            s.subscribers(0, SubKind::Channel, b"keep").unwrap(),
            Receivers::Exactly(1)
        );
        for i in 0..cap {
            let name = format!("full-{i}");
            s.subscription_add(0, SubKind::Channel, name.as_bytes(), 1)
                .unwrap();
        }
        assert_eq!(
            s.subscribers(0, SubKind::Channel, b"keep").unwrap(),
            Receivers::Unknown
        );
        s.pubsub_reset(0).unwrap();
        assert_eq!(
            s.subscribers(0, SubKind::Channel, b"keep").unwrap(),
            Receivers::Exactly(0)
        );
    }

    proptest::proptest! {
        /// Pattern records are read from shared memory (I1): any bytes parse
        /// without a panic, into records that lie within them.
        #[test]
        fn any_pattern_bytes_parse_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128)) {
            let mut out = Vec::new();
            parse_patterns(&bytes, &mut out);
            proptest::prop_assert!(out.iter().map(|p| p.pattern.len()).sum::<usize>() <= bytes.len());
        }
    }

    #[test]
    fn patterns_round_trip() {
        let s = store("patterns");
        let g0 = s.patterns_generation(1).unwrap();
        assert!(s.set_pattern(1, SubKind::Channel, b"news.*", 2).unwrap());
        assert!(s.set_pattern(1, SubKind::Key(4), b"md:*", 1).unwrap());
        assert!(s
            .set_pattern(1, SubKind::Queue, b"job.* workers", 3)
            .unwrap());
        let mut list = Vec::new();
        let g1 = s.patterns(1, &mut list).unwrap();
        assert_ne!(g0, g1);
        assert_eq!(list.len(), 3);
        assert_eq!(list[2].kind, SubKind::Queue);
        assert_eq!(list[2].count, 3);
        assert_eq!(list[0].pattern, b"news.*");
        assert_eq!(list[0].count, 2);
        assert_eq!(list[1].kind, SubKind::Key(4));
        assert_eq!(s.pubsub_slots().unwrap(), 1 << 1);
        assert_eq!(s.key_subscriber_slots().unwrap(), 1 << 1);
        s.set_pattern(1, SubKind::Channel, b"news.*", 0).unwrap();
        s.set_pattern(1, SubKind::Key(4), b"md:*", 0).unwrap();
        s.set_pattern(1, SubKind::Queue, b"job.* workers", 0)
            .unwrap();
        s.patterns(1, &mut list).unwrap();
        assert!(list.is_empty());
        assert_eq!(s.pubsub_slots().unwrap(), 0);
        let mut garbage = Vec::new();
        parse_patterns(
            &[255, 255, 255, 255, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
            &mut garbage,
        );
        assert!(garbage.is_empty());
    }
}
