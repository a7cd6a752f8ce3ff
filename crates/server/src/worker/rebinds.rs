//! CONFIG SET port / tls-port / bind answers once every worker serves the
//! new listeners: this worker moves its own at once, the supervisor moves
//! the others' and says when they all have. Until then another worker may
//! still accept on an old address (a port just given up, or taken by
//! another protocol), which a Redis client, used to one process, does not
//! expect after the reply.

use std::cell::Cell;
use std::time::Duration;

use tokio::sync::Notify;

/// How long a reply waits at most (the supervisor may be re-executing).
const WAIT_AT_MOST: Duration = Duration::from_secs(10);

/// This worker's moves and the supervisor's answers.
#[derive(Default)]
pub(crate) struct Rebinds {
    sent: Cell<u64>,
    done: Cell<u64>,
    arrived: Notify,
}

impl Rebinds {
    /// Numbers a move this worker tells the supervisor about.
    pub fn sent(&self) -> u64 {
        self.sent.set(self.sent.get() + 1);
        self.sent.get()
    }

    /// Moves numbered so far (a batch that changes it waits).
    pub fn latest(&self) -> u64 {
        self.sent.get()
    }

    /// The supervisor says every worker serves the listeners of move `id`.
    pub fn done(&self, id: u64) {
        if id > self.done.get() {
            self.done.set(id);
            self.arrived.notify_waiters();
        }
    }

    /// Waits until move `id` is done everywhere.
    pub async fn wait(&self, id: u64) {
        let settled = async {
            loop {
                let arrived = self.arrived.notified();
                tokio::pin!(arrived);
                arrived.as_mut().enable();
                if self.done.get() >= id {
                    return;
                }
                arrived.await;
            }
        };
        let _ = tokio::time::timeout(WAIT_AT_MOST, settled).await;
    }
}
