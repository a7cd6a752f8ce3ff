//! Pub/sub delivery on this worker: the frames the engine produced for
//! local clients go into each client's push queue, which its connection
//! writes between replies; workers whose rings got a first message are woken
//! up; a backlog of messages for full rings is flushed as they drain.
//!
//! A client whose queue outgrows `client-output-buffer-limit` (the pubsub
//! class while it has subscriptions, else normal) is closed, as Redis does:
//! the publisher and every other subscriber go on untouched.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::worker::Worker;

/// Frames waiting for one client's connection to write them.
#[derive(Default)]
pub(crate) struct Push {
    buf: RefCell<Vec<u8>>,
    /// Signalled when frames arrive.
    pub ready: Notify,
    /// Bytes the connection is writing now: still the client's output.
    writing: Cell<usize>,
    /// When the output went past the soft limit (None: it is under it).
    over_soft_since: Cell<Option<Instant>>,
    /// Set once the limit closed the client: nothing more is queued.
    cut: Cell<bool>,
    /// What the connection holds besides the queue: its query buffer and
    /// the replies it has not written yet (`maxmemory` counts them).
    held: Cell<usize>,
    /// The client's memory as last added to the worker's published total.
    pub published: Cell<u64>,
    /// Set once `maxmemory-clients` closed the client (it is not picked
    /// again while its connection ends).
    pub evicted: Cell<bool>,
}

/// Where a client's frames go.
pub(crate) struct Target {
    pub push: Rc<Push>,
    /// The output limit of its class.
    pub limit: Limit,
    /// Closes it.
    pub kill: Rc<Notify>,
}

/// `client-output-buffer-limit` for one class: hard bytes, soft bytes, soft
/// seconds (0 = no limit).
pub(crate) type Limit = (u64, u64, u64);

impl Push {
    /// Moves the queued frames to the end of `out`.
    pub fn take_into(&self, out: &mut Vec<u8>) {
        let mut buf = self.buf.borrow_mut();
        if out.is_empty() {
            std::mem::swap(&mut *buf, out);
        } else {
            out.extend_from_slice(&buf);
            buf.clear();
        }
    }

    /// Queues bytes that must reach the client whatever the limits (the
    /// rest of a reply a busy script's worker could not write at once).
    pub fn append(&self, bytes: &[u8]) {
        self.buf.borrow_mut().extend_from_slice(bytes);
        self.ready.notify_one();
    }

    /// Whether frames wait.
    pub fn is_empty(&self) -> bool {
        self.buf.borrow().is_empty()
    }

    /// Records what the connection holds in its buffers (see `held`).
    pub fn set_held(&self, n: usize) {
        self.held.set(n);
    }

    /// The client's buffers: what its connection holds and what waits
    /// in the queue.
    pub fn memory(&self) -> u64 {
        (self.held.get() + self.buf.borrow().len()) as u64
    }

    /// Records how many bytes the connection is writing (0 when done).
    pub fn set_writing(&self, n: usize) {
        self.writing.set(n);
    }

    /// Queues a frame; returns false when that makes the client's output
    /// break `limit` (the caller closes the client).
    fn queue(&self, frames: Vec<u8>, limit: Limit, now: Instant) -> bool {
        if self.cut.get() {
            return true;
        }
        let mut buf = self.buf.borrow_mut();
        if buf.is_empty() && buf.capacity() < frames.len() {
            *buf = frames;
        } else {
            buf.extend_from_slice(&frames);
        }
        let pending = (buf.len() + self.writing.get()) as u64;
        let (hard, soft, soft_seconds) = limit;
        let over_hard = hard != 0 && pending > hard;
        let over_soft = soft != 0 && pending > soft;
        let soft_for_too_long = match (over_soft, self.over_soft_since.get()) {
            (false, _) => {
                self.over_soft_since.set(None);
                false
            }
            (true, None) => {
                self.over_soft_since.set(Some(now));
                false
            }
            // Redis counts whole seconds past the soft limit.
            (true, Some(since)) => now.duration_since(since).as_secs() > soft_seconds,
        };
        if over_hard || soft_for_too_long {
            self.cut.set(true);
            buf.clear();
            buf.shrink_to_fit();
            return false;
        }
        true
    }
}

impl Worker {
    /// Hands the engine's pub/sub output to clients and other workers: call
    /// it after every stretch of work with the engine.
    pub(crate) fn flush_pubsub(&self) {
        let (outbox, wakes, backlog, normal, pubsub) = {
            let mut engine = self.engine.borrow_mut();
            let (normal, pubsub) = {
                let c = engine.config();
                (c.output_limit_normal, c.output_limit_pubsub)
            };
            let ps = engine.pubsub();
            (
                ps.take_outbox(),
                ps.take_wakes(),
                ps.has_backlog(),
                normal,
                pubsub,
            )
        };
        if !outbox.is_empty() {
            let now = Instant::now();
            for (id, frames) in outbox {
                let Some(t) = self.clients.push_target(id, normal, pubsub) else {
                    continue;
                };
                if t.push.queue(frames, t.limit, now) {
                    t.push.ready.notify_one();
                    self.account_client(&t.push);
                } else {
                    t.kill.notify_one();
                }
            }
        }
        for slot in (0..32).filter(|s| wakes & (1 << s) != 0) {
            self.bus.wake(slot);
        }
        if backlog {
            self.backlog_pending.notify_one();
        }
    }
}

/// Moves messages for full rings into them as they drain.
pub(crate) async fn flush_backlog(worker: Rc<Worker>) {
    loop {
        worker.backlog_pending.notified().await;
        loop {
            worker.engine.borrow_mut().pubsub().flush_backlog();
            worker.flush_pubsub();
            if !worker.engine.borrow_mut().pubsub().has_backlog() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Flushes pub/sub output that appeared outside a RESP batch (memcached and
/// HTTP writes, expiry, blocked clients served), as soon as the loop is free.
pub(crate) async fn pump(worker: Rc<Worker>) {
    loop {
        worker.pubsub_output.notified().await;
        worker.flush_pubsub();
    }
}
