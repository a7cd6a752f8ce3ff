//! Client-side caching's ordering (docs/pubsub.md, "Client-side caching"):
//! a write's reply leaves only after every worker that tracks something has
//! handled the keys it wrote, as in Redis, where the invalidations are sent
//! before the reply. The engine numbers the messages per receiving worker
//! and the receivers acknowledge them; the mailbox loop wakes the replies
//! waiting here when acknowledgements arrive.

use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::worker::Worker;

/// How often a waiting reply checks that the workers it waits for still
/// run: one that died or was replaced will not acknowledge.
const ALIVE_CHECK: Duration = Duration::from_millis(100);

/// Replies waiting for acknowledgements, woken as they arrive.
#[derive(Default)]
pub(crate) struct TrackingAcks {
    arrived: Notify,
    /// The engine's acknowledgement count at the last wake-up.
    seen: std::cell::Cell<u64>,
}

impl TrackingAcks {
    /// Called after the mailbox is drained: wakes the waiting replies when
    /// acknowledgements came in.
    pub fn check(&self, acks_total: u64) {
        if acks_total != self.seen.replace(acks_total) {
            self.arrived.notify_waiters();
        }
    }

    /// Waits until each (slot, seq) in `owed` is acknowledged, or its
    /// worker is gone or was started again since the wait began.
    pub async fn wait(&self, worker: &Worker, owed: &[(u32, u64)]) {
        if all_acked(worker, owed) {
            return;
        }
        let began = Instant::now();
        let began_ms = epoch_ms();
        let mut owed: Vec<(u32, u64)> = owed.to_vec();
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            {
                let engine = worker.engine.borrow();
                owed.retain(|&(slot, seq)| !engine.tracking_acked(slot, seq));
            }
            if owed.is_empty() {
                return;
            }
            if tokio::time::timeout(ALIVE_CHECK, arrived).await.is_err()
                && began.elapsed() >= ALIVE_CHECK
            {
                let alive = worker.store.workers().unwrap_or_default();
                owed.retain(|&(slot, _)| {
                    alive
                        .iter()
                        .any(|w| w.slot == slot && w.started_ms <= began_ms)
                });
            }
        }
    }
}

fn all_acked(worker: &Worker, owed: &[(u32, u64)]) -> bool {
    let engine = worker.engine.borrow();
    owed.iter()
        .all(|&(slot, seq)| engine.tracking_acked(slot, seq))
}

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
