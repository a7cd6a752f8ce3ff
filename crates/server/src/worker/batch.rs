//! The one batch runner: what every front end does around the requests it
//! has parsed, so that a front end is only its codec and its transport.
//!
//! A front end (RESP over TCP and Unix sockets, memcached text, binary and
//! UDP, HTTP and what it upgrades to) reads bytes, and for each read hands a
//! closure to [`Runner::run`] that parses and executes every complete request
//! with the engine borrowed. The runner around it:
//!
//! 1. opens the engine's batch for the client's session (the clock is read
//!    once, CLIENT PAUSE is looked at once) and notes the log's end;
//! 2. after the closure, closes the batch, remembers the end of the last log
//!    frame the batch wrote (so `appendfsync always` knows what to wait
//!    for), adds the requests run to the worker's command counter, and hands
//!    the pub/sub output the batch produced to clients and other workers;
//! 3. before replies leave, [`Runner::settle`] waits for the fsync that
//!    covers every write of this client (`appendfsync always`, group
//!    commit), and for the workers that track the keys it wrote (client-
//!    side caching); [`Runner::reply`] does that and writes.
//!
//! The engine is never borrowed across an `.await`: the closure runs
//! synchronously, and settling and writing happen after it.

use bytes::{Buf, BytesMut};
use engine::{Engine, Session};
use store::WorkerCounter;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::worker::Worker;

/// Output room a client keeps between batches at most (beyond it, it
/// shrinks back to its front end's usual size).
pub(crate) const SHRINK_ABOVE: usize = 1 << 20;

/// What a batch's closure returns: its own outcome and how many requests it
/// ran (the worker's command counter, INFO's `total_commands_processed`).
pub(crate) struct Ran<T> {
    /// What the front end does next.
    pub next: T,
    /// Requests executed in the batch.
    pub executed: u64,
}

impl<T> Ran<T> {
    /// A batch that used the first `consumed` bytes of `buf`: drops them,
    /// and notes what is left in and what waits to go out (CLIENT LIST's
    /// `qbuf` and `omem`).
    pub fn consumed(
        session: &mut Session,
        buf: &mut BytesMut,
        consumed: usize,
        out: &[u8],
        next: T,
        executed: u64,
    ) -> Ran<T> {
        buf.advance(consumed);
        session.qbuf = buf.len();
        session.omem = out.len();
        Ran { next, executed }
    }
}

/// One client's (or one UDP socket's) runner: what its writes owe the log.
#[derive(Debug, Default)]
pub(crate) struct Runner {
    /// The end of the last log frame this client's requests wrote (0: none).
    logged_to: u64,
    /// The synchronous mode when that write ran: replicas to wait for, the
    /// timeout and the level (`replica-sync-count`, `-timeout`, `-level`).
    sync: Option<engine::replication::SyncMode>,
    /// Client-side caching messages to other workers that the last batch
    /// that sent any left unacknowledged, as (slot, seq).
    tracking_unacked: Vec<(u32, u64)>,
    /// The listener move (CONFIG SET port / bind) the last batch made.
    rebind: u64,
}

impl Runner {
    /// A runner for a new client.
    pub fn new() -> Runner {
        Runner::default()
    }

    /// Runs one batch of requests for `session`: `batch` parses and executes
    /// them with the engine borrowed. See the module's steps 1 and 2.
    pub fn run<T>(
        &mut self,
        worker: &Worker,
        session: &mut Session,
        batch: impl FnOnce(&mut Engine, &mut Session) -> Ran<T>,
    ) -> T {
        let ran = {
            let mut engine = worker.engine.borrow_mut();
            let before = engine.log_last_end();
            let tracking_before = engine.tracking_sent_total();
            let rebinds_before = worker.rebinds.latest();
            engine.begin_batch(session);
            let ran = batch(&mut engine, session);
            engine.end_batch();
            let after = engine.log_last_end();
            if after != before {
                self.logged_to = after;
                self.sync = engine::replication::sync_mode(&engine);
            }
            if worker.rebinds.latest() != rebinds_before {
                self.rebind = worker.rebinds.latest();
            }
            if engine.tracking_sent_total() != tracking_before {
                self.tracking_unacked = engine.tracking_unacked();
            }
            ran
        };
        if ran.executed > 0 {
            let _ = worker.store.add_worker_counter(
                worker.slot,
                WorkerCounter::Commands,
                ran.executed as i64,
            );
        }
        worker.flush_pubsub();
        ran.next
    }

    /// Waits, under `appendfsync always`, until everything this client
    /// wrote is fsynced, and in the synchronous mode until enough replicas
    /// have applied it, until the workers that track keys it wrote have
    /// handled them, and until every worker serves listeners it moved: no
    /// reply may leave before that.
    pub async fn settle(&self, worker: &Worker) {
        if self.rebind != 0 {
            worker.rebinds.wait(self.rebind).await;
        }
        if !self.tracking_unacked.is_empty() {
            worker
                .tracking_acks
                .wait(worker, &self.tracking_unacked)
                .await;
        }
        worker.durable.wait(self.logged_to).await;
        if let Some(mode) = self.sync {
            worker.replica_acks.wait(self.logged_to, mode).await;
        }
    }

    /// Lets the worker's other connections that have requests waiting run
    /// them before this reply is written, so that the replies of one turn
    /// of the event loop leave back to back, as Redis writes its pending
    /// replies all at once before it sleeps. A client woken by the first
    /// of them is then still awake for the rest: one wake-up (on a
    /// virtual machine, an interrupt between cores is costly) serves many
    /// replies, where writing each reply as soon as it is ready wakes the
    /// client once per reply. At pipeline 16 this took a third or more off
    /// the worker's CPU per request (bench/results/collection-writes-cpu.md);
    /// a lone client waits one turn of the scheduler.
    pub async fn before_write() {
        tokio::task::yield_now().await;
    }

    /// Settles, then writes `out` and empties it. Room past
    /// [`SHRINK_ABOVE`] goes back down to `keep` bytes, so that one large
    /// reply does not stay allocated per client.
    pub async fn reply<W>(
        &self,
        worker: &Worker,
        stream: &mut W,
        out: &mut Vec<u8>,
        keep: usize,
    ) -> std::io::Result<()>
    where
        W: AsyncWrite + Unpin,
    {
        if out.is_empty() {
            return Ok(());
        }
        self.settle(worker).await;
        Runner::before_write().await;
        stream.write_all(out).await?;
        out.clear();
        if out.capacity() > SHRINK_ABOVE {
            out.shrink_to(keep);
        }
        Ok(())
    }
}
