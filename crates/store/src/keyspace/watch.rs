//! What WATCH compares: a key's version and the segment's flush epoch.
//!
//! Every write that publishes or changes an entry stamps the entry's version
//! word with the next value of the segment's write counter (a header word
//! bumped with fetch-add), so two different states of a key never carry the
//! same version, whichever process wrote them. Commands that change many
//! keys at once without stamping each (FLUSHDB, FLUSHALL, SWAPDB) bump the
//! flush epoch instead. A client that recorded both can tell, inside an
//! exclusive section (I13), whether anything it watched changed since.

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::keyspace::handle::{check_db, Handle};
use crate::keyspace::index;
use crate::segment::layout::*;

impl Handle {
    /// A version no other write of this segment has stamped or will stamp.
    /// With the log off, a crash after taking one only leaves a gap; with
    /// it on, the counter is the log's head, so the version is the LSN of a
    /// `Pad` frame taken for it.
    pub fn next_version(&mut self) -> Result<u64> {
        if self.logging() {
            self.log_stage(|out| out.extend_from_slice(&[15, 0, 0, 0, 0, 0, 0, 0]));
            return self.log_now();
        }
        let counter = self.ctx.region().a64(H_WRITE_VERSION)?;
        Ok(counter.fetch_add(1, Ordering::Relaxed).wrapping_add(1))
    }

    /// The last version any write took: unchanged means nothing in the
    /// segment was written since.
    pub fn last_version(&self) -> Result<u64> {
        Ok(self
            .ctx
            .region()
            .a64(H_WRITE_VERSION)?
            .load(Ordering::Acquire))
    }

    /// Called under the db map lock, before a FLUSHDB, FLUSHALL or SWAPDB
    /// changes any key: a WATCH that read the old epoch fails its EXEC, and
    /// one that read the new epoch reads its keys after the bump.
    pub(crate) fn bump_flush_epoch(&self) -> Result<()> {
        let epoch = self.ctx.region().a64(H_FLUSH_EPOCH)?;
        epoch.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The flush epoch: how many FLUSHDB, FLUSHALL and SWAPDB have run on
    /// the segment. WATCH records it and EXEC fails if it moved. That is
    /// coarser than Redis, which only dirties the watched keys those
    /// commands actually removed or moved.
    pub fn flush_epoch(&self) -> Result<u64> {
        Ok(self
            .ctx
            .region()
            .a64(H_FLUSH_EPOCH)?
            .load(Ordering::Acquire))
    }

    /// The version of `key` in `db`: a value that changes with every write to
    /// the key (SET, an in-place APPEND, EXPIRE, a RENAME onto it…) and is
    /// never reused, or None when the key is missing or expired. Lock-free,
    /// and without the side effects of a read (no LRU touch, no hit or miss
    /// counted, no lazy expiry), as Redis's WATCH looks at keys.
    pub fn key_version(&mut self, db: u8, key: &[u8]) -> Result<Option<u64>> {
        check_db(db)?;
        let now_ms = self.now_ms();
        loop {
            let view = self.db_view()?;
            let pdb = view.phys(db);
            let pos = index::key_pos(&self.ctx, pdb, key);
            let found = index::read_stable(&mut self.ctx, pos.bucket, |r| {
                Ok(index::find(r, &pos, pdb, key)?.map(|f| f.raw))
            })?;
            if self.db_view_still(view)? {
                return Ok(found.filter(|raw| !raw.expired(now_ms)).map(|raw| raw.lsn));
            }
        }
    }
}
