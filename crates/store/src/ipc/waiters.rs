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
    }
}
