//! The synchronous mode (`replica-sync-count N`, docs/replication.md): a
//! client's replies wait, after any `appendfsync always` fsync, until N
//! replicas have applied (`replica-sync-level disk`: fsynced) everything
//! its requests wrote. The supervisor publishes each level's position in a
//! shared setting word as acknowledgements arrive; a thread of the worker
//! per level sleeps on it and wakes the waiting clients, so the event loop
//! keeps serving everyone else.

use std::cell::OnceCell;
use std::time::Duration;

use engine::replication::{self as repl, SyncMode};
use store::Store;
use tokio::sync::watch;

/// How long the watcher sleeps at most: a change of the count alone (the
/// word's high byte) is seen at the latest then.
const WATCH_TICK: Duration = Duration::from_millis(100);

/// The replicas' published progress as this worker sees it.
pub(crate) struct ReplicaAcks {
    store: Store,
    /// Per level (memory, disk): fed by a thread started the first time a
    /// reply waits for that level.
    acked: [OnceCell<Option<watch::Receiver<u64>>>; 2],
}

impl ReplicaAcks {
    pub fn new(store: &Store) -> ReplicaAcks {
        ReplicaAcks {
            store: store.clone(),
            acked: [OnceCell::new(), OnceCell::new()],
        }
    }

    fn receiver(&self, disk: bool) -> Option<watch::Receiver<u64>> {
        self.acked[disk as usize]
            .get_or_init(|| {
                let store = self.store.clone();
                let (tx, rx) = watch::channel(repl::sync_acked_word(&store, disk));
                std::thread::Builder::new()
                    .name("sync-acks-watch".into())
                    .spawn(move || loop {
                        let seen = repl::sync_acked_word(&store, disk);
                        tx.send_if_modified(|v| {
                            let moved = *v != seen;
                            *v = seen;
                            moved
                        });
                        if tx.is_closed() {
                            return;
                        }
                        repl::wait_sync_acked(&store, disk, seen, WATCH_TICK);
                    })
                    .ok()
                    .map(|_| rx)
            })
            .clone()
    }

    /// Waits until `mode.count` replicas have applied (or fsynced) the log
    /// up to `end`, or `mode.timeout_ms` passed (0: as long as it takes);
    /// then the reply leaves.
    pub async fn wait(&self, end: u64, mode: SyncMode) {
        let SyncMode {
            count,
            timeout_ms,
            disk,
        } = mode;
        if end == 0 || repl::sync_covers(repl::sync_acked_word(&self.store, disk), count, end) {
            return;
        }
        let Some(mut rx) = self.receiver(disk) else {
            return;
        };
        // The senders forward the write now rather than at their next poll.
        repl::want_sync(&self.store, end);
        let covered = async move {
            loop {
                if repl::sync_covers(*rx.borrow_and_update(), count, end) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        match timeout_ms {
            0 => covered.await,
            ms => {
                let _ = tokio::time::timeout(Duration::from_millis(ms), covered).await;
            }
        }
    }
}
