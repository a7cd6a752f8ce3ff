//! RESTORE's write: a whole value under a key, with its expiry and access
//! information, as one step. The key is checked and written under its
//! bucket lock and the value published in one transaction, so no other
//! client sees a half-built value, and a key that appeared meanwhile is
//! never overwritten without `replace`.

use crate::collections::Collection;
use crate::error::{Error, Result};
use crate::keyspace::entry::{lru_word, ValueType};
use crate::keyspace::handle::{Handle, Locked};
use crate::keyspace::lfu;
use crate::segment::layout::E_LRU;

/// How [`Handle::restore_value_string`] and [`Handle::restore_value_collection`] write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    /// Replace a key that exists (else it is left alone and the call
    /// returns false).
    pub replace: bool,
    /// Expiry, ms since the epoch (0: none). The caller handles a time
    /// already past (RESTORE then writes nothing).
    pub expire_at_ms: u64,
    /// Seconds since the last access (Redis's IDLETIME); None: accessed now.
    pub idle_seconds: Option<u64>,
    /// The LFU counter (Redis's FREQ); None: a new key's.
    pub lfu_counter: Option<u8>,
}

impl RestoreOptions {
    /// The LRU word of the restored entry at `now_ms`: the LRU clock moved
    /// back by the idle time, the LFU counter stamped with this minute.
    fn lru_word(&self, now_ms: u64) -> u64 {
        let now_s = (now_ms / 1000) as u32;
        let idle = self.idle_seconds.map_or(0, |s| s.min(now_s as u64) as u32);
        let counter = self.lfu_counter.unwrap_or(lfu::LFU_INIT_VAL);
        lru_word(now_s - idle, lfu::pack(counter, lfu::minutes(now_ms)))
    }
}

impl Handle {
    /// Writes the string `value` as `key` in one step: false (nothing
    /// written) when the key exists and `opts.replace` is not set.
    pub fn restore_value_string(
        &mut self,
        db: u8,
        key: &[u8],
        value: &[u8],
        opts: &RestoreOptions,
    ) -> Result<bool> {
        self.with_key(db, key, |h, l| {
            if l.found.is_some() && !opts.replace {
                return Ok(false);
            }
            let fields = h.entry_fields(l.db, ValueType::String, opts.expire_at_ms, 0);
            let (blk, pending) = h.new_entry(&fields, key, &[value], 0)?;
            h.publish(l, blk, pending)?;
            h.set_restored_lru(l, opts)?;
            Ok(true)
        })
    }

    /// Writes the whole collection `value` (not empty) as `key` in one
    /// step: false (nothing written) when the key exists and
    /// `opts.replace` is not set. Whatever the key held is dropped whole.
    pub fn restore_value_collection<C: Collection>(
        &mut self,
        db: u8,
        key: &[u8],
        mut value: C,
        opts: &RestoreOptions,
    ) -> Result<bool> {
        if value.is_empty() {
            return Err(Error::BadValue);
        }
        self.with_key(db, key, |h, l| {
            if l.found.is_some() && !opts.replace {
                return Ok(false);
            }
            h.put_collection_as(key, l, &mut value, Some((opts.expire_at_ms, 0)))?;
            h.set_restored_lru(l, opts)?;
            Ok(true)
        })
    }

    /// Stamps the just-published entry of `l` with the access information
    /// RESTORE asked for. A plain store under the bucket lock, as every
    /// access's LRU update is (the word is not part of the value: a
    /// replaced key's inherited LFU counter is overwritten here).
    fn set_restored_lru(&mut self, l: &Locked, opts: &RestoreOptions) -> Result<()> {
        let Some(found) = l.found else {
            return Err(Error::NoSuchKey);
        };
        let word = opts.lru_word(self.now_ms());
        self.ctx.region().store64(found.raw.off + E_LRU, word)
    }
}
