//! The worker registry: one record per worker slot in the segment header, so
//! that every worker (and `shoal ctl`) sees every other worker's pid, state,
//! port and counters; and the server-wide CLIENT ID counter and shared
//! settings. Each record is written only by the worker in that slot, with
//! plain atomic stores; readers treat every word as untrusted (I1) and judge
//! liveness by pid plus process start time, as for contexts.

use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::segment::context::{proc_start_time, process_alive};
use crate::segment::layout::*;
use crate::segment::shm::Region;
use crate::store::Store;

/// Where a worker is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerState {
    /// The slot is unused.
    Free,
    /// Attached, binding its listeners.
    Starting,
    /// Accepting and serving clients.
    Serving,
    /// Finishing the requests in flight before it exits.
    Draining,
}

impl WorkerState {
    fn from_u64(v: u64) -> WorkerState {
        match v {
            1 => WorkerState::Starting,
            2 => WorkerState::Serving,
            3 => WorkerState::Draining,
            _ => WorkerState::Free,
        }
    }

    /// The name `shoal ctl status` and INFO print.
    pub fn name(self) -> &'static str {
        match self {
            WorkerState::Free => "free",
            WorkerState::Starting => "starting",
            WorkerState::Serving => "serving",
            WorkerState::Draining => "draining",
        }
    }
}

/// A counter in a worker's registry record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerCounter {
    /// Connections open now.
    Connections,
    /// Connections accepted since the worker started.
    TotalConnections,
    /// Commands executed since the worker started.
    Commands,
    /// Clients blocked (BLPOP & co.) now.
    Blocked,
    /// Bytes held in the worker's clients' buffers now.
    ClientMemory,
    /// Clients closed for `maxmemory-clients`.
    EvictedClients,
}

/// One live worker as the registry shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Slot number (also its mailbox).
    pub slot: u32,
    /// Process id.
    pub pid: u32,
    /// State.
    pub state: WorkerState,
    /// When it registered, ms since the epoch.
    pub started_ms: u64,
    /// RESP TCP port (0 = none).
    pub port: u16,
    /// Connections open now.
    pub connections: u64,
    /// Connections accepted in total.
    pub total_connections: u64,
    /// Commands executed.
    pub commands: u64,
    /// How many times this slot's worker was started again after dying.
    pub restarts: u64,
    /// Clients blocked (BLPOP & co.) now.
    pub blocked: u64,
    /// Bytes held in its clients' buffers (as last published).
    pub client_memory: u64,
    /// Clients it closed for `maxmemory-clients`.
    pub evicted_clients: u64,
}

fn rec(slot: u32) -> Result<u64> {
    if slot >= MAX_WORKERS {
        return Err(Error::Attach(format!(
            "worker slot {slot} is out of range (0..{MAX_WORKERS})"
        )));
    }
    Ok(H_WORKERS + slot as u64 * WORKER_REC)
}

impl Store {
    /// Claims `slot` for the calling process: records pid, start time and
    /// port, state Starting, and zeroes its counters. The supervisor hands out
    /// slots; a slot whose previous worker died is simply taken over.
    pub fn register_worker(&self, slot: u32, port: u16) -> Result<()> {
        let r = &self.sh.region;
        let off = rec(slot)?;
        let pid = std::process::id();
        // A predecessor that left without marking the slot free died: this
        // is a restart. A slot freed by a clean exit (a scale-down, an
        // upgrade) starts counting afresh.
        let died = r.load64(off + W_PID)? != 0 && r.load64(off + W_STATE)? != 0;
        let restarts = if died {
            r.load64(off + W_RESTARTS)?.saturating_add(1)
        } else {
            0
        };
        r.store64(off + W_STATE, 0)?;
        r.store64(off + W_START_TIME, proc_start_time(pid).unwrap_or(0))?;
        r.store64(off + W_STARTED_MS, self.sh.clock.now_ms())?;
        r.store64(off + W_PORT, port as u64)?;
        r.store64(off + W_CONNECTIONS, 0)?;
        r.store64(off + W_TOTAL_CONNECTIONS, 0)?;
        r.store64(off + W_COMMANDS, 0)?;
        r.store64(off + W_BLOCKED, 0)?;
        r.store64(off + W_WRITING, 0)?;
        r.store64(off + W_CLIENT_MEMORY, 0)?;
        r.store64(off + W_EVICTED_CLIENTS, 0)?;
        r.store64(off + W_RESTARTS, restarts)?;
        r.store64(off + W_PID, pid as u64)?;
        r.store64(off + W_STATE, 1)?;
        Ok(())
    }

    /// Changes the state of `slot` (written by its own worker).
    pub fn set_worker_state(&self, slot: u32, state: WorkerState) -> Result<()> {
        let v = match state {
            WorkerState::Free => 0,
            WorkerState::Starting => 1,
            WorkerState::Serving => 2,
            WorkerState::Draining => 3,
        };
        self.sh.region.store64(rec(slot)? + W_STATE, v)
    }

    /// Adds `delta` to one of `slot`'s counters.
    pub fn add_worker_counter(&self, slot: u32, counter: WorkerCounter, delta: i64) -> Result<()> {
        let field = match counter {
            WorkerCounter::Connections => W_CONNECTIONS,
            WorkerCounter::TotalConnections => W_TOTAL_CONNECTIONS,
            WorkerCounter::Commands => W_COMMANDS,
            WorkerCounter::Blocked => W_BLOCKED,
            WorkerCounter::ClientMemory => W_CLIENT_MEMORY,
            WorkerCounter::EvictedClients => W_EVICTED_CLIENTS,
        };
        self.sh
            .region
            .a64(rec(slot)? + field)?
            .fetch_add(delta as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Every worker whose process is alive, by slot.
    pub fn workers(&self) -> Result<Vec<WorkerInfo>> {
        let r = &self.sh.region;
        let mut out = Vec::new();
        for slot in 0..MAX_WORKERS {
            let off = rec(slot)?;
            let state = WorkerState::from_u64(r.load64(off + W_STATE)?);
            let pid = r.load64(off + W_PID)?;
            if state == WorkerState::Free || pid == 0 || pid > u32::MAX as u64 {
                continue;
            }
            if !process_alive(pid as u32, r.load64(off + W_START_TIME)?) {
                continue;
            }
            out.push(WorkerInfo {
                slot,
                pid: pid as u32,
                state,
                started_ms: r.load64(off + W_STARTED_MS)?,
                port: r.load64(off + W_PORT)? as u16,
                connections: r.load64(off + W_CONNECTIONS)?,
                total_connections: r.load64(off + W_TOTAL_CONNECTIONS)?,
                commands: r.load64(off + W_COMMANDS)?,
                restarts: r.load64(off + W_RESTARTS)?,
                blocked: r.load64(off + W_BLOCKED)?,
                client_memory: clamp_client_memory(r.load64(off + W_CLIENT_MEMORY)?),
                evicted_clients: r.load64(off + W_EVICTED_CLIENTS)?,
            });
        }
        Ok(out)
    }

    /// Bytes held in the buffers of every worker's clients, as each
    /// published them ([`clients_memory_in`]).
    pub fn clients_memory(&self) -> Result<u64> {
        clients_memory_in(&self.sh.region)
    }

    /// Each serving slot's open connections, read from the registry alone:
    /// unlike [`Store::workers`] it does not check that each pid is alive
    /// (a read of /proc per worker), so it is cheap enough for every accept.
    /// A worker that died a moment ago may still be listed until its slot
    /// is started again.
    pub fn serving_connections(&self) -> Result<Vec<(u32, u64)>> {
        let r = &self.sh.region;
        let mut out = Vec::new();
        for slot in 0..MAX_WORKERS {
            let off = rec(slot)?;
            if WorkerState::from_u64(r.load64(off + W_STATE)?) == WorkerState::Serving {
                out.push((slot, r.load64(off + W_CONNECTIONS)?));
            }
        }
        Ok(out)
    }

    /// FAILOVER's write gate, worker side: marks `slot` as running a
    /// command that may write (`on`) before that command checks the role
    /// and the pause, and clears the mark once it is done. The fence after
    /// the mark pairs with the one in [`Store::wait_writers`]: either the
    /// command sees the role the supervisor set, or the supervisor sees the
    /// mark and waits for the command (Dekker's handshake).
    pub fn set_worker_writing(&self, slot: u32, on: bool) -> Result<()> {
        self.sh
            .region
            .a64(rec(slot)? + W_WRITING)?
            .store(u64::from(on), Ordering::SeqCst);
        if on {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
        Ok(())
    }

    /// FAILOVER's write gate, supervisor side: called after a change of
    /// role that makes every later write refuse itself, returns once no
    /// live worker is still inside a command that passed its checks before
    /// the change (or `timeout` passed: false). A dead worker's mark does
    /// not count.
    pub fn wait_writers(&self, timeout: std::time::Duration) -> Result<bool> {
        std::sync::atomic::fence(Ordering::SeqCst);
        let r = &self.sh.region;
        let began = std::time::Instant::now();
        for slot in 0..MAX_WORKERS {
            let off = rec(slot)?;
            loop {
                let writing = r.a64(off + W_WRITING)?.load(Ordering::SeqCst) != 0;
                if !writing
                    || WorkerState::from_u64(r.load64(off + W_STATE)?) == WorkerState::Free
                    || !u32::try_from(r.load64(off + W_PID)?).is_ok_and(|pid| {
                        process_alive(pid, r.load64(off + W_START_TIME).unwrap_or(0))
                    })
                {
                    break;
                }
                if began.elapsed() > timeout {
                    return Ok(false);
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        Ok(true)
    }

    /// Sets shared setting word `i` and wakes everyone sleeping in
    /// [`Store::wait_config_word`] on it.
    pub fn publish_config_word(&self, i: u64, v: u64) -> Result<()> {
        self.set_config_word(i, v)?;
        let word = self.sh.region.a32(H_CONFIG + 8 * i)?;
        let _ = rustix::thread::futex::wake(
            word,
            rustix::thread::futex::Flags::empty(),
            i32::MAX as u32,
        );
        Ok(())
    }

    /// Sleeps until shared setting word `i` differs from `seen`, it is
    /// published again, or `timeout` passes (a thread of a worker waits
    /// here, never its event loop).
    pub fn wait_config_word(&self, i: u64, seen: u64, timeout: std::time::Duration) -> Result<()> {
        if self.config_word(i)? != seen {
            return Ok(());
        }
        // The futex watches the word's low half (little-endian: its first
        // four bytes); a change only in the high half ends at the timeout.
        let word = self.sh.region.a32(H_CONFIG + 8 * i)?;
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let _ = rustix::thread::futex::wait(
            word,
            rustix::thread::futex::Flags::empty(),
            seen as u32,
            Some(&ts),
        );
        Ok(())
    }

    /// A new CLIENT ID, unique across every worker of the segment.
    pub fn next_client_id(&self) -> Result<u64> {
        Ok(self
            .sh
            .region
            .a64(H_NEXT_CLIENT_ID)?
            .fetch_add(1, Ordering::Relaxed))
    }

    /// Records the supervisor's pid (0 when it stops).
    pub fn set_supervisor_pid(&self, pid: u32) -> Result<()> {
        self.sh.region.store64(H_SUPERVISOR_PID, pid as u64)
    }

    /// The supervisor's pid, when one is recorded and alive.
    pub fn supervisor_pid(&self) -> Result<Option<u32>> {
        let pid = self.sh.region.load64(H_SUPERVISOR_PID)?;
        Ok(
            (pid != 0 && pid <= u32::MAX as u64 && process_alive(pid as u32, 0))
                .then_some(pid as u32),
        )
    }

    /// Shared setting word `i` (0..CONFIG_WORDS).
    pub fn config_word(&self, i: u64) -> Result<u64> {
        if i >= CONFIG_WORDS {
            return Err(Error::Corrupted(
                H_CONFIG.saturating_add(i.saturating_mul(8)),
            ));
        }
        Ok(self
            .sh
            .region
            .a64(H_CONFIG + 8 * i)?
            .load(Ordering::Acquire))
    }

    /// Sets shared setting word `i` to `new` if it holds `current`; whether
    /// it did (one of several workers racing to act on a word wins).
    pub fn swap_config_word(&self, i: u64, current: u64, new: u64) -> Result<bool> {
        if i >= CONFIG_WORDS {
            return Err(Error::Corrupted(
                H_CONFIG.saturating_add(i.saturating_mul(8)),
            ));
        }
        Ok(self
            .sh
            .region
            .a64(H_CONFIG + 8 * i)?
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            .is_ok())
    }

    /// Sets shared setting word `i`.
    pub fn set_config_word(&self, i: u64, v: u64) -> Result<()> {
        if i >= CONFIG_WORDS {
            return Err(Error::Corrupted(
                H_CONFIG.saturating_add(i.saturating_mul(8)),
            ));
        }
        self.sh
            .region
            .a64(H_CONFIG + 8 * i)?
            .store(v, Ordering::Release);
        Ok(())
    }
}

impl crate::keyspace::handle::Handle {
    /// Sets the shared setting text (CONFIG SET's values). Writers take the text
    /// lock (a dead writer's is recovered like any lock); readers retry on
    /// the seqlock word.
    pub fn set_config_text(&mut self, text: &[u8]) -> Result<()> {
        self.update_config_text(|_| Ok(text.to_vec()))
    }

    /// Replaces the shared setting text with `f(old text)` under the text
    /// lock, so that two workers changing different settings at once both
    /// land (a read-modify-write that no other writer interleaves).
    pub fn update_config_text(&mut self, f: impl FnOnce(&[u8]) -> Result<Vec<u8>>) -> Result<()> {
        self.ctx.lock(CT_LOCK)?;
        let res = (|| {
            // No other writer runs while the lock is held; a text a dead
            // writer left halfway reads as it is (the new text replaces it).
            let r = self.ctx.region();
            let len = (r.load32(CT_LEN)? as u64).min(CONFIG_TEXT_MAX);
            let mut old = Vec::new();
            r.read_bytes(CT_BYTES, len, &mut old)?;
            let text = f(&old)?;
            if text.len() as u64 > CONFIG_TEXT_MAX {
                return Err(Error::TooLarge);
            }
            let seq = r.a64(CT_SEQ)?;
            // Odd already if a writer died halfway: it stays odd until done.
            let odd = seq.load(Ordering::Relaxed) | 1;
            seq.store(odd, Ordering::Release);
            std::sync::atomic::fence(Ordering::Release);
            r.write_bytes(CT_BYTES, &text)?;
            r.store32(CT_LEN, text.len() as u32)?;
            seq.store(odd + 1, Ordering::Release);
            Ok(())
        })();
        self.ctx.unlock(CT_LOCK)?;
        res
    }
}

impl Store {
    /// The shared setting text (empty until set).
    pub fn config_text(&self) -> Result<Vec<u8>> {
        read_config_text(&self.sh.region)
    }
}

/// The shared setting text, read under its seqlock (retried while a writer
/// is halfway).
fn read_config_text(r: &Region) -> Result<Vec<u8>> {
    for _ in 0..100_000 {
        let seq = r.a64(CT_SEQ)?.load(Ordering::Acquire);
        if seq & 1 == 1 {
            std::thread::yield_now();
            continue;
        }
        let len = (r.load32(CT_LEN)? as u64).min(CONFIG_TEXT_MAX);
        let mut out = Vec::new();
        r.read_bytes(CT_BYTES, len, &mut out)?;
        std::sync::atomic::fence(Ordering::Acquire);
        if r.a64(CT_SEQ)?.load(Ordering::Acquire) == seq {
            return Ok(out);
        }
    }
    Err(Error::Corrupted(CT_SEQ))
}

/// A worker's published client memory: a counter of deltas, so a word
/// read between a worker's two updates (or a corrupt one) may look
/// negative; it counts as nothing then.
fn clamp_client_memory(v: u64) -> u64 {
    if (v as i64) < 0 {
        0
    } else {
        v
    }
}

/// Bytes held in client buffers over every worker slot not free, read from
/// the registry alone (no liveness check: it runs before allocations under
/// `maxmemory`). A worker that died leaves its figure until its slot is
/// started again, which zeroes it.
pub(crate) fn clients_memory_in(r: &Region) -> Result<u64> {
    let mut total = 0u64;
    for slot in 0..MAX_WORKERS {
        let off = rec(slot)?;
        if WorkerState::from_u64(r.load64(off + W_STATE)?) == WorkerState::Free {
            continue;
        }
        total = total.saturating_add(clamp_client_memory(r.load64(off + W_CLIENT_MEMORY)?));
    }
    Ok(total)
}

/// Shared setting word `i` of the segment `sh` (see `Store::config_word`),
/// for layers that hold the segment but not the store.
pub(crate) fn config_word_in(sh: &crate::segment::Shared, i: u64) -> Result<u64> {
    if i >= CONFIG_WORDS {
        return Err(Error::Corrupted(
            H_CONFIG.saturating_add(i.saturating_mul(8)),
        ));
    }
    Ok(sh.region.a64(H_CONFIG + 8 * i)?.load(Ordering::Acquire))
}
