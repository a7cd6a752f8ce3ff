//! The key log: which keys this handle created, expired or evicted on its
//! own account, for keyspace notifications (Redis's "new", "expired" and
//! "evicted" events) and key subscriptions. A command names the keys it
//! writes, but a lookup that finds a key past its expiry, the sweeper and
//! eviction remove keys nobody named, and only the store knows whether a
//! write created its key. The log is off by default; while it is off each
//! place that could record costs one branch.

use crate::keyspace::dbmap::{valid_map, DbView};
use crate::keyspace::entry::Raw;
use crate::keyspace::handle::Handle;
use crate::segment::layout::*;

/// What happened to a key in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEvent {
    /// A write created it (it did not exist before): Redis's `dbAdd`.
    /// RENAME and COPY always create their destination, as Redis deletes
    /// and adds it.
    Created,
    /// Found past its expiry and removed (on access or by the sweeper).
    Expired,
    /// Removed by eviction to make room.
    Evicted,
}

/// One logged event: the key's logical db (as clients name it, whatever
/// SWAPDB did), the key, and what happened.
pub type KeyLogEntry = (u8, Vec<u8>, KeyEvent);

/// A handle's log and what it records.
#[derive(Debug, Default)]
pub(crate) struct KeyLog {
    /// Record expired and evicted keys.
    pub removals: bool,
    /// Record created keys.
    pub creations: bool,
    events: Vec<KeyLogEntry>,
}

impl Handle {
    /// Turns recording on or off: `removals` for keys expired or evicted,
    /// `creations` for keys a write created. Turning a kind off forgets
    /// nothing already recorded.
    pub fn set_key_log(&mut self, removals: bool, creations: bool) {
        self.key_log.removals = removals;
        self.key_log.creations = creations;
    }

    /// Whether events wait to be taken.
    pub fn key_log_pending(&self) -> bool {
        !self.key_log.events.is_empty()
    }

    /// Moves the recorded events, oldest first, to the end of `out`.
    pub fn take_key_log(&mut self, out: &mut Vec<KeyLogEntry>) {
        out.append(&mut self.key_log.events);
    }

    /// Records `event` for `key` of physical db `pdb`. Call with a bucket
    /// lock held (or inside an exclusive section): then the db map cannot
    /// change under us (I11), so the logical db read here is the one the
    /// operation acted in.
    pub(crate) fn log_key(&mut self, pdb: u8, key: &[u8], event: KeyEvent) {
        let db = self.logical_db(pdb);
        self.key_log.events.push((db, key.to_vec(), event));
    }

    /// [`Handle::log_key`] for the entry `raw`, whose key is read from the
    /// segment (the sweeper and eviction know only the entry).
    pub(crate) fn log_entry(&mut self, raw: &Raw, event: KeyEvent) {
        let mut key = Vec::with_capacity(raw.keylen as usize);
        // An entry that cannot be read is reported with an empty key rather
        // than not at all: it was removed.
        let _ = self
            .ctx
            .region()
            .read_bytes(raw.off + E_KEY, raw.keylen, &mut key);
        let db = self.logical_db(raw.db);
        self.key_log.events.push((db, key, event));
    }

    /// The logical db that maps to physical `pdb` now.
    fn logical_db(&self, pdb: u8) -> u8 {
        let map = self.ctx.region().load64(H_DB_MAP).unwrap_or(0);
        if !valid_map(map) {
            return pdb;
        }
        let view = DbView { gen: 0, map };
        (0..NUM_DBS as u8)
            .find(|&d| view.phys(d) == pdb)
            .unwrap_or(pdb)
    }
}
