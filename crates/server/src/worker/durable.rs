//! `appendfsync always`: a client's replies wait until the log writer has
//! fsynced past the last frame its requests wrote. Other clients keep going
//! meanwhile; one fsync answers everyone it covers (group commit).

use std::time::Duration;

use store::log::{FsyncPolicy, LogRing};
use store::Store;
use tokio::sync::watch;

/// The log's fsynced LSN as this worker sees it.
pub(crate) struct Durable {
    ring: LogRing,
    /// Fed by a thread that sleeps on the segment's fsync futex.
    fsynced: Option<watch::Receiver<u64>>,
}

impl Durable {
    /// Watches the fsynced LSN if the log is on.
    pub fn new(store: &Store) -> Durable {
        let ring = store.log_ring();
        if !ring.status().enabled {
            return Durable {
                ring,
                fsynced: None,
            };
        }
        let (tx, rx) = watch::channel(ring.fsynced());
        let watcher = ring.clone();
        let spawned = std::thread::Builder::new()
            .name("fsync-watch".into())
            .spawn(move || loop {
                let seen = watcher.fsynced();
                tx.send_if_modified(|v| {
                    let moved = *v != seen;
                    *v = seen;
                    moved
                });
                if tx.is_closed() {
                    return;
                }
                watcher.wait_fsynced(seen, Duration::from_secs(1));
            });
        Durable {
            ring,
            fsynced: spawned.ok().map(|_| rx),
        }
    }

    /// Waits, if the policy is `always`, until everything before `end` is
    /// fsynced.
    pub async fn wait(&self, end: u64) {
        let Some(rx) = &self.fsynced else { return };
        if end == 0 || self.ring.policy() != FsyncPolicy::Always || self.ring.fsynced() >= end {
            return;
        }
        let mut rx = rx.clone();
        while *rx.borrow_and_update() < end {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}
