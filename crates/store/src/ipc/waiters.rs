//! The waiter table (I14): one u32 word per key hash bucket in the header,
//! bit `s` set while the worker in slot `s` has at least one client blocked
//! (BLPOP & co.) on a key hashing to that word. A worker that writes a key
//! reads the key's word to learn which other workers to tell that it is
//! ready; each worker sets and clears only its own bit.
//!
//! No wake-up is lost because both sides order their accesses with SeqCst
//! fences: the blocking worker sets its bit ([`Store::add_waiter`]) before it
//! looks at the keys one last time; the writing worker publishes its write
//! before it reads the word ([`Store::waiters_on`]). Either the writer sees
//! the bit, or the blocker's last look sees the write.
//!
//! Blocked clients are served in one order across workers, the order they
//! blocked: each takes a server-wide sequence number
//! ([`Store::next_waiter_seq`]), and each worker publishes, per queue it has
//! waiters in (a key of a db, for one value type), the smallest sequence
//! number of its waiters there in its own table of queue heads. A worker
//! about to serve its oldest waiter on a ready key first looks at the other
//! workers' heads for that queue ([`Store::oldest_waiter_elsewhere`]) and
//! leaves the key to an older waiter's worker. A queue is named by a 64-bit
//! hash, like a subscription (pubsub.rs): two queues with one hash on two
//! workers would only make one wait for the other's turn. A table that
//! overflows says so, and its heads stop counting: its worker's clients are
//! then served in the order wake-ups arrive, as before this table.

use std::sync::atomic::{fence, Ordering};

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::error::{Error, Result};
use crate::segment::layout::*;
use crate::store::Store;

/// The table word for a key of logical db `db`: both sides of a wake-up
/// compute it the same way.
pub fn waiter_word(db: u8, key: &[u8]) -> u32 {
    (xxh3_64_with_seed(key, 0x3a17_0000 ^ db as u64) % WAITER_WORDS as u64) as u32
}

/// The name of the queue of clients blocked on `key` of db `db` that pop a
/// value of type `wants` (a `ValueType` code): never 0, which marks a free
/// record.
pub fn waiter_queue(db: u8, key: &[u8], wants: u8) -> u64 {
    xxh3_64_with_seed(key, 0x9e0e_0000 ^ (db as u64) << 8 ^ wants as u64).max(1)
}

fn word_off(word: u32) -> Result<u64> {
    if word >= WAITER_WORDS {
        return Err(Error::Corrupted(H_WAITERS));
    }
    Ok(H_WAITERS + 4 * word as u64)
}

/// The bit of worker `slot` in a per-slot mask (waiter words, pub/sub
/// masks).
pub(crate) fn slot_bit(slot: u32) -> Result<u32> {
    if slot >= MAX_WORKERS {
        return Err(Error::Attach(format!(
            "worker slot {slot} is out of range (0..{MAX_WORKERS})"
        )));
    }
    Ok(1 << slot)
}

impl Store {
    /// Sets `slot`'s bit in `word`: call it when the worker's first waiter on
    /// a key of that word registers, before that waiter's last look at its
    /// keys (I14).
    pub fn add_waiter(&self, word: u32, slot: u32) -> Result<()> {
        let bit = slot_bit(slot)?;
        self.sh
            .region
            .a32(word_off(word)?)?
            .fetch_or(bit, Ordering::SeqCst);
        // The blocker's following reads of the keys are ordered after the bit.
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// Clears `slot`'s bit in `word` (its last waiter on the word left).
    pub fn remove_waiter(&self, word: u32, slot: u32) -> Result<()> {
        let bit = slot_bit(slot)?;
        self.sh
            .region
            .a32(word_off(word)?)?
            .fetch_and(!bit, Ordering::SeqCst);
        Ok(())
    }

    /// The slots with waiters on keys of `word`, as a bitmask. Call it after
    /// the write that made a key ready: the fence orders the write before
    /// the read of the word (I14).
    pub fn waiters_on(&self, word: u32) -> Result<u32> {
        let a = self.sh.region.a32(word_off(word)?)?;
        fence(Ordering::SeqCst);
        Ok(a.load(Ordering::SeqCst))
    }

    /// Clears `slot`'s bit from every word: a new worker in a slot does this
    /// first, since a predecessor killed with SIGKILL may have left bits
    /// (which would only cost other workers needless messages).
    pub fn clear_waiters(&self, slot: u32) -> Result<()> {
        let bit = slot_bit(slot)?;
        for word in 0..WAITER_WORDS {
            self.sh
                .region
                .a32(word_off(word)?)?
                .fetch_and(!bit, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl Store {
    fn heads(&self, slot: u32) -> Result<u64> {
        slot_bit(slot)?;
        let geo = &self.sh.geo;
        Ok(geo.wq_off + slot as u64 * geo.wq_size)
    }

    /// The next place in the server-wide order of blocked clients (from 1).
    pub fn next_waiter_seq(&self) -> Result<u64> {
        Ok(self
            .sh
            .region
            .a64(H_WAITER_SEQ)?
            .fetch_add(1, Ordering::SeqCst)
            + 1)
    }

    /// Publishes `seq` as the oldest of `slot`'s waiters in `queue`, or, with
    /// None, that it has none there. Only the slot's own worker calls it.
    /// Publish before the waiter's last look at its keys (like its bit).
    pub fn set_waiter_head(&self, slot: u32, queue: u64, seq: Option<u64>) -> Result<()> {
        let base = self.heads(slot)?;
        let r = &self.sh.region;
        let mut free = None;
        for i in 0..self.sh.geo.wq_cap {
            let at = base + WQ_RECORDS + i * WQ_RECORD;
            let name = r.a64(at)?.load(Ordering::SeqCst);
            if name == queue {
                match seq {
                    Some(seq) => r.a64(at + 8)?.store(seq, Ordering::SeqCst),
                    None => r.a64(at)?.store(0, Ordering::SeqCst),
                }
                return Ok(());
            }
            if name == 0 && free.is_none() {
                free = Some(at);
            }
        }
        let Some(seq) = seq else {
            return Ok(());
        };
        match free {
            Some(at) => {
                // The number first: a reader that sees the name sees it.
                r.a64(at + 8)?.store(seq, Ordering::SeqCst);
                r.a64(at)?.store(queue, Ordering::SeqCst);
            }
            None => r.a32(base + WQ_OVERFLOW)?.store(1, Ordering::SeqCst),
        }
        fence(Ordering::SeqCst);
        Ok(())
    }

    /// The oldest sequence number other workers than `slot` publish for
    /// `queue`, looking only at the slots in `slots` (the bits of the
    /// queue's key in the waiter table). Tables that overflowed are skipped.
    pub fn oldest_waiter_elsewhere(
        &self,
        slot: u32,
        queue: u64,
        slots: u32,
    ) -> Result<Option<u64>> {
        let r = &self.sh.region;
        let mut oldest: Option<u64> = None;
        for other in (0..MAX_WORKERS).filter(|&s| s != slot && slots & (1 << s) != 0) {
            let base = self.heads(other)?;
            if r.a32(base + WQ_OVERFLOW)?.load(Ordering::SeqCst) != 0 {
                continue;
            }
            for i in 0..self.sh.geo.wq_cap {
                let at = base + WQ_RECORDS + i * WQ_RECORD;
                if r.a64(at)?.load(Ordering::SeqCst) != queue {
                    continue;
                }
                let seq = r.a64(at + 8)?.load(Ordering::SeqCst);
                // Gone meanwhile (the name was cleared): not a head.
                if r.a64(at)?.load(Ordering::SeqCst) == queue {
                    oldest = Some(oldest.map_or(seq, |o| o.min(seq)));
                }
                break;
            }
        }
        Ok(oldest)
    }

    /// Clears `slot`'s table of queue heads if it overflowed (its worker
    /// calls it when it has no waiter left, so its heads count again).
    pub fn reset_overflowed_waiter_heads(&self, slot: u32) -> Result<()> {
        let base = self.heads(slot)?;
        if self
            .sh
            .region
            .a32(base + WQ_OVERFLOW)?
            .load(Ordering::SeqCst)
            == 0
        {
            return Ok(());
        }
        self.clear_waiter_heads(slot)
    }

    /// Clears `slot`'s table of queue heads (a new worker in the slot does
    /// this first, like [`Store::clear_waiters`]).
    pub fn clear_waiter_heads(&self, slot: u32) -> Result<()> {
        let base = self.heads(slot)?;
        let r = &self.sh.region;
        for i in 0..self.sh.geo.wq_cap {
            r.a64(base + WQ_RECORDS + i * WQ_RECORD)?
                .store(0, Ordering::SeqCst);
        }
        r.a32(base + WQ_OVERFLOW)?.store(0, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{Location, OpenOptions};

    #[test]
    fn bits_are_per_slot_and_per_word() {
        let path = std::env::temp_dir().join(format!("shoal-waiters-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&OpenOptions {
            location: Location::Path(path.clone()),
            size: 8 << 20,
            ..OpenOptions::default()
        })
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        let w = waiter_word(0, b"queue");
        assert!(w < WAITER_WORDS);
        assert_eq!(w, waiter_word(0, b"queue"));
        assert_eq!(store.waiters_on(w).unwrap(), 0);
        store.add_waiter(w, 3).unwrap();
        store.add_waiter(w, 0).unwrap();
        store.add_waiter(w, 3).unwrap();
        assert_eq!(store.waiters_on(w).unwrap(), 0b1001);
        store.remove_waiter(w, 3).unwrap();
        assert_eq!(store.waiters_on(w).unwrap(), 0b1);
        let other = (w + 1) % WAITER_WORDS;
        store.add_waiter(other, 0).unwrap();
        store.add_waiter(other, 31).unwrap();
        store.clear_waiters(0).unwrap();
        assert_eq!(store.waiters_on(w).unwrap(), 0);
        assert_eq!(store.waiters_on(other).unwrap(), 1 << 31);
        assert!(store.add_waiter(w, MAX_WORKERS).is_err());
        assert!(store.waiters_on(WAITER_WORDS).is_err());

        // Queue heads: the oldest over the other slots named in the mask.
        let q = waiter_queue(0, b"queue", 2);
        assert_ne!(q, waiter_queue(0, b"queue", 5));
        assert_ne!(q, waiter_queue(1, b"queue", 2));
        let (a, b) = (
            store.next_waiter_seq().unwrap(),
            store.next_waiter_seq().unwrap(),
        );
        assert!(a < b);
        store.set_waiter_head(1, q, Some(b)).unwrap();
        store.set_waiter_head(4, q, Some(a)).unwrap();
        let both = (1 << 1) | (1 << 4);
        assert_eq!(store.oldest_waiter_elsewhere(0, q, both).unwrap(), Some(a));
        assert_eq!(store.oldest_waiter_elsewhere(4, q, both).unwrap(), Some(b));
        assert_eq!(
            store.oldest_waiter_elsewhere(0, q, 1 << 1).unwrap(),
            Some(b)
        );
        store.set_waiter_head(4, q, None).unwrap();
        assert_eq!(store.oldest_waiter_elsewhere(0, q, both).unwrap(), Some(b));
        store.clear_waiter_heads(1).unwrap();
        assert_eq!(store.oldest_waiter_elsewhere(0, q, both).unwrap(), None);

        // A full table overflows: its heads stop counting until it is reset.
        store.set_waiter_head(4, q, Some(a)).unwrap();
        let cap = store.sh.geo.wq_cap;
        for i in 0..cap {
            store
                .set_waiter_head(4, waiter_queue(0, &i.to_le_bytes(), 2), Some(b))
                .unwrap();
        }
        assert_eq!(store.oldest_waiter_elsewhere(0, q, 1 << 4).unwrap(), None);
        store.reset_overflowed_waiter_heads(4).unwrap();
        store.set_waiter_head(4, q, Some(a)).unwrap();
        assert_eq!(
            store.oldest_waiter_elsewhere(0, q, 1 << 4).unwrap(),
            Some(a)
        );
    }
}
