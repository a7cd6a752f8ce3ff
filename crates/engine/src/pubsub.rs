//! Pub/sub across workers: channels, patterns, shard channels, retained
//! channels (last-value cache) and key subscriptions.

use crate::engine::Engine;

impl Engine {
    /// Publishes `message` on `channel` to every subscriber on every worker;
    /// returns how many clients receive it.
    pub(crate) fn publish(&mut self, channel: &[u8], message: &[u8]) -> u64 {
        let _ = (channel, message);
        0
    }

    /// `key` of `db` was written or removed: its key subscribers get the
    /// value it has now.
    pub(crate) fn key_changed(&mut self, db: u8, key: &[u8]) {
        let _ = (db, key);
    }
}
