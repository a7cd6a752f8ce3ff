//! The ACL user table area: one text (the engine's serialized users) that
//! every worker reads, so that a user changed on one worker is enforced by
//! all at once. It holds two copies: a writer fills the copy that is not
//! live, then bumps the sequence word whose low bit names the live copy. A
//! writer that dies halfway leaves the live copy whole (crash-safe); a
//! reader retries when the sequence moved while it copied. The bytes are
//! untrusted input like every shared byte: lengths are clamped to the area.

use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::segment::layout::*;
use crate::store::Store;

impl crate::keyspace::handle::Handle {
    /// Replaces the user table text with `f(old text)` under the area's
    /// lock, so that two workers changing users at once both land; `None`
    /// leaves it as it is. Fails with [`Error::TooLarge`] when the new text
    /// does not fit one copy.
    pub fn update_users_text(&mut self, f: impl FnOnce(&[u8]) -> Option<Vec<u8>>) -> Result<()> {
        let geo = self.ctx.sh.geo;
        let lock = geo.users_off + U_LOCK;
        self.ctx.lock(lock)?;
        let res = (|| {
            let r = self.ctx.region();
            let seq = r.a64(geo.users_off + U_SEQ)?;
            let now = seq.load(Ordering::Acquire);
            let cap = users_copy_size(geo.users_size);
            let live = (now & 1) as usize;
            let old = read_copy(self.ctx.region(), geo.users_off, cap, live)?;
            let Some(text) = f(&old) else {
                return Ok(());
            };
            if text.len() as u64 > cap {
                return Err(Error::TooLarge);
            }
            let spare = 1 - live;
            let r = self.ctx.region();
            r.write_bytes(geo.users_off + U_BYTES + spare as u64 * cap, &text)?;
            r.store32(geo.users_off + len_word(spare), text.len() as u32)?;
            std::sync::atomic::fence(Ordering::Release);
            r.a64(geo.users_off + U_SEQ)?
                .store(now.wrapping_add(1), Ordering::Release);
            Ok(())
        })();
        self.ctx.unlock(lock)?;
        res
    }
}

impl Store {
    /// The user table text (empty until first written).
    pub fn users_text(&self) -> Result<Vec<u8>> {
        let geo = self.sh.geo;
        let r = &self.sh.region;
        let cap = users_copy_size(geo.users_size);
        for _ in 0..100_000 {
            let seq = r.a64(geo.users_off + U_SEQ)?.load(Ordering::Acquire);
            let text = read_copy(r, geo.users_off, cap, (seq & 1) as usize)?;
            std::sync::atomic::fence(Ordering::Acquire);
            if r.a64(geo.users_off + U_SEQ)?.load(Ordering::Acquire) == seq {
                return Ok(text);
            }
            std::thread::yield_now();
        }
        Err(Error::Corrupted(geo.users_off + U_SEQ))
    }

    /// The largest user table text the segment holds.
    pub fn users_text_max(&self) -> u64 {
        users_copy_size(self.sh.geo.users_size)
    }
}

/// Bytes of one copy in an area of `size` bytes.
fn users_copy_size(size: u64) -> u64 {
    size.saturating_sub(U_BYTES) / 2
}

/// The length word of copy `i`.
fn len_word(i: usize) -> u64 {
    if i == 0 {
        U_LEN0
    } else {
        U_LEN1
    }
}

/// Copy `i`'s bytes, its length clamped to the copy.
fn read_copy(r: &crate::segment::shm::Region, off: u64, cap: u64, i: usize) -> Result<Vec<u8>> {
    let len = (r.load32(off + len_word(i))? as u64).min(cap);
    let mut out = Vec::new();
    r.read_bytes(off + U_BYTES + i as u64 * cap, len, &mut out)?;
    Ok(out)
}
