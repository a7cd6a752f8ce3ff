//! Clients held by CLIENT PAUSE. The pause itself is a shared setting word
//! (`engine`'s `pause.rs`) that every worker reads before each command; a
//! held connection keeps its request unread and waits here for the pause
//! to end, then runs it again (it may be held again if a new pause began).
//!
//! Each worker has one timer task: while anything here is held it sleeps
//! until the pause's deadline (re-read each time, a later CLIENT PAUSE may
//! push it out), or until a PAUSE_CHANGED notice says CLIENT UNPAUSE ran on
//! some worker; when the word no longer holds a pause in force, it wakes
//! every held connection, then serves the keys of blocked clients whose
//! re-run the pause held (BLPOP pops: a write).

use std::rc::Rc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::worker::bus;
use crate::worker::Worker;

/// This worker's side of CLIENT PAUSE.
#[derive(Default)]
pub(crate) struct Pause {
    /// Something is held, or the pause changed: the timer looks again.
    armed: Notify,
    /// The pause ended: held connections run their command again.
    pub over: Notify,
    /// CLIENT UNPAUSE ran here: tell the other workers.
    announce: Notify,
}

impl Pause {
    /// A connection (or a blocked client's re-run) is held: the timer
    /// watches the pause's deadline. Create the `over` future first.
    pub fn arm(&self) {
        self.armed.notify_one();
    }

    /// CLIENT UNPAUSE ran on this worker: wake the held clients here and
    /// tell every other worker.
    pub fn unpaused_here(&self) {
        self.arm();
        self.announce.notify_one();
    }

    /// A PAUSE_CHANGED notice arrived from another worker.
    pub fn changed_elsewhere(&self) {
        self.arm();
    }
}

/// Wakes the held clients once the pause is over.
pub(crate) async fn timer(worker: Rc<Worker>) {
    loop {
        tokio::select! {
            _ = worker.pause.armed.notified() => {}
            _ = worker.blocking.held_notice.notified() => {}
        }
        loop {
            let (paused, now) = {
                let e = worker.engine.borrow();
                (e.pause(), e.now_ms())
            };
            let Some((_, deadline)) = paused else { break };
            // In force up to and including the deadline.
            let wait = Duration::from_millis(deadline.saturating_sub(now).saturating_add(1));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = worker.pause.armed.notified() => {}
            }
        }
        worker.pause.over.notify_waiters();
        if worker.blocking.take_held_by_pause() {
            let mut engine = worker.engine.borrow_mut();
            let keys = worker.blocking.all_keys();
            worker.blocking.serve_ready(&mut engine, keys);
        }
        worker.flush_pubsub();
    }
}

/// Sends PAUSE_CHANGED to every other worker after CLIENT UNPAUSE here.
pub(crate) async fn announce(worker: Rc<Worker>) {
    loop {
        worker.pause.announce.notified().await;
        for slot in worker.peers() {
            worker
                .bus
                .send(&worker.bus_handle, slot, bus::PAUSE_CHANGED, 0, &[])
                .await;
        }
    }
}
