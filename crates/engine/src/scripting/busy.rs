//! Busy scripts, as Redis 7.0 has them: a script or function that runs
//! longer than `busy-reply-threshold` makes every other client get `-BUSY`
//! for commands not flagged `allow-busy`, and SCRIPT KILL / FUNCTION KILL
//! stop it if it has not written yet.
//!
//! The script runs on its worker's thread inside an exclusive section of
//! the store, so the other workers learn about it from one shared word
//! (`config::word::SCRIPT_BUSY`): which worker runs it, since when, whether
//! it is a function, whether it wrote, and whether a kill or a SHUTDOWN
//! NOSAVE asks it to stop. The script's Lua hook polls the word.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use store::Store;

use crate::config::word::SCRIPT_BUSY;
use crate::error::CmdError;

/// A script runs (so a busy word is never 0).
const RUNNING: u64 = 1;
/// It is a function (FCALL), not an EVAL script.
const FUNCTION: u64 = 1 << 1;
/// It already ran a write command: SCRIPT KILL cannot stop it.
const WROTE: u64 = 1 << 2;
/// SCRIPT KILL or FUNCTION KILL asked it to stop.
const KILL: u64 = 1 << 3;
/// SHUTDOWN NOSAVE asked it to stop, whether it wrote or not.
const SHUTDOWN: u64 = 1 << 4;
/// The bits that change during a run; the rest names the run.
const REQUESTS: u64 = WROTE | KILL | SHUTDOWN;
const SLOT_SHIFT: u32 = 8;
const SLOT_MASK: u64 = 0xff;
const START_SHIFT: u32 = 16;

/// Redis's reply to a command refused while an EVAL script is busy.
pub(crate) const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// The same while a function is busy.
pub(crate) const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// The error a killed script ends with (Redis's `luaMaskCountHook`).
pub(crate) const KILLED: &[u8] = b"Script killed by user with SCRIPT KILL...";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// A busy word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word(u64);

impl Word {
    fn slot(self) -> u32 {
        ((self.0 >> SLOT_SHIFT) & SLOT_MASK) as u32
    }
    fn started_ms(self) -> u64 {
        self.0 >> START_SHIFT
    }
    fn has(self, bit: u64) -> bool {
        self.0 & bit != 0
    }
    fn run(self) -> u64 {
        self.0 & !REQUESTS
    }
}

/// Why a running script must stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SCRIPT KILL / FUNCTION KILL (the script has not written).
    Kill,
    /// SHUTDOWN NOSAVE: the server goes down.
    Shutdown,
}

/// The run of one script on this worker, published in the busy word for
/// as long as it lives.
pub(crate) struct Running {
    store: Store,
    run: u64,
    wrote: std::cell::Cell<bool>,
    ended: std::cell::Cell<bool>,
    described: std::cell::Cell<bool>,
}

impl Running {
    /// Publishes a run that starts now on worker `slot`.
    pub(crate) fn begin(store: &Store, slot: u32, function: bool) -> Running {
        let mut run = RUNNING | ((slot as u64 & SLOT_MASK) << SLOT_SHIFT);
        run |= now_ms() << START_SHIFT;
        if function {
            run |= FUNCTION;
        }
        let _ = store.set_config_word(SCRIPT_BUSY, run);
        Running {
            store: store.clone(),
            run,
            wrote: std::cell::Cell::new(false),
            ended: std::cell::Cell::new(false),
            described: std::cell::Cell::new(false),
        }
    }

    /// Records that the script ran a write command (from then on it cannot
    /// be killed).
    pub(crate) fn wrote(&self) {
        if !self.wrote.replace(true) {
            self.update(|w| w | WROTE);
        }
    }

    /// Whether someone asked this run to stop.
    pub(crate) fn stop_requested(&self) -> Option<Stop> {
        let w = Word(self.store.config_word(SCRIPT_BUSY).ok()?);
        if w.run() != self.run {
            return None;
        }
        if w.has(SHUTDOWN) {
            Some(Stop::Shutdown)
        } else if w.has(KILL) && !w.has(WROTE) {
            Some(Stop::Kill)
        } else {
            None
        }
    }

    /// Whether the script already wrote.
    pub(crate) fn has_written(&self) -> bool {
        self.wrote.get()
    }

    /// Changes the word while it still names this run.
    fn update(&self, f: impl Fn(u64) -> u64) {
        while let Ok(now) = self.store.config_word(SCRIPT_BUSY) {
            if Word(now).run() != self.run {
                return;
            }
            if self
                .store
                .swap_config_word(SCRIPT_BUSY, now, f(now))
                .unwrap_or(true)
            {
                return;
            }
        }
    }
}

/// Most bytes of a busy function's description (its name and command).
const DESCRIPTION_MAX: usize = 64 << 10;

/// Where a busy function's name and command are kept for FUNCTION STATS
/// on every worker: a file beside the segment, written once the run turns
/// busy and removed when it ends.
pub(crate) fn description_file(segment: &std::path::Path) -> std::path::PathBuf {
    super::beside(segment, ".running")
}

impl Running {
    /// Publishes the function's name and command (FUNCTION STATS's
    /// `running_script`), once.
    pub(crate) fn describe(&self, name: &str, command: &[Vec<u8>]) {
        if self.described.replace(true) {
            return;
        }
        let mut bytes = self.run.to_le_bytes().to_vec();
        for item in std::iter::once(name.as_bytes()).chain(command.iter().map(Vec::as_slice)) {
            if bytes.len() + 4 + item.len() > DESCRIPTION_MAX {
                break;
            }
            bytes.extend_from_slice(&(item.len() as u32).to_le_bytes());
            bytes.extend_from_slice(item);
        }
        let path = description_file(self.store.path());
        let _ = std::fs::write(path, bytes);
    }

    /// Ends the run for the other workers (the Lua hook may keep its copy
    /// of `self` longer).
    pub(crate) fn end(&self) {
        if !self.ended.replace(true) {
            if self.described.get() {
                let _ = std::fs::remove_file(description_file(self.store.path()));
            }
            self.update(|_| 0);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.end();
    }
}

/// What another client's command meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// No script of another worker runs: go on.
    Free,
    /// One runs, for less than the threshold: wait (as Redis's clients
    /// wait for its one thread).
    Wait,
    /// One runs past the threshold: refuse with this error.
    Busy(&'static str),
}

/// The gate for a command of a client of worker `slot`, with the
/// `busy-reply-threshold` this worker has (ms).
pub(crate) fn gate(store: &Store, slot: u32, threshold_ms: u64) -> Gate {
    let w = Word(store.config_word(SCRIPT_BUSY).unwrap_or(0));
    if w.0 == 0 || w.slot() == slot {
        return Gate::Free;
    }
    if now_ms().saturating_sub(w.started_ms()) < threshold_ms {
        return Gate::Wait;
    }
    if !runner_alive(store, w) {
        return Gate::Free;
    }
    Gate::Busy(if w.has(FUNCTION) {
        BUSY_FUNCTION
    } else {
        BUSY_EVAL
    })
}

/// The BUSY error for the script running now (an EVAL script's unless
/// the busy word says a function).
pub(crate) fn own_busy_error(store: &Store) -> &'static str {
    match Word(store.config_word(SCRIPT_BUSY).unwrap_or(0)).has(FUNCTION) {
        true => BUSY_FUNCTION,
        false => BUSY_EVAL,
    }
}

/// Whether a script of another worker than `slot` runs now (it holds the
/// store's exclusive section: background work that would wait for it is
/// put off).
pub(crate) fn running_elsewhere(store: &Store, slot: u32) -> bool {
    let w = Word(store.config_word(SCRIPT_BUSY).unwrap_or(0));
    w.0 != 0 && w.slot() != slot
}

/// Waits while a script of another worker runs and is not yet past the
/// threshold; then the command may run (`Ok`) or is refused with BUSY.
/// The thread sleeps meanwhile, as Redis's one thread would be busy.
pub(crate) fn wait_gate(store: &Store, slot: u32, threshold_ms: u64) -> Result<(), CmdError> {
    let mut rounds = 0u32;
    loop {
        match gate(store, slot, threshold_ms) {
            Gate::Free => return Ok(()),
            Gate::Busy(text) => return Err(CmdError::msg(text)),
            Gate::Wait => {}
        }
        rounds = rounds.saturating_add(1);
        if rounds <= 64 {
            std::hint::spin_loop();
        } else if rounds <= 1024 {
            std::thread::yield_now();
        } else {
            let us = (10 * u64::from(rounds - 1024)).min(1000);
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}

/// Whether the worker that published `w` still runs it; a word left by a
/// worker that died in the middle of a script is cleared.
fn runner_alive(store: &Store, w: Word) -> bool {
    let Ok(workers) = store.workers() else {
        return true;
    };
    let alive = workers
        .iter()
        .any(|i| i.slot == w.slot() && i.started_ms <= w.started_ms().saturating_add(1));
    if !alive {
        let _ = store.swap_config_word(SCRIPT_BUSY, w.0, 0);
    }
    alive
}

/// The function running now, on any worker, if it is past the threshold
/// on its worker and described itself: its name, command and how long it
/// has run (ms).
pub(crate) fn running_function(store: &Store) -> Option<(Vec<u8>, Vec<Vec<u8>>, u64)> {
    let w = Word(store.config_word(SCRIPT_BUSY).ok()?);
    if w.0 == 0 || !w.has(FUNCTION) {
        return None;
    }
    let bytes = std::fs::read(description_file(store.path())).ok()?;
    // The file is outside the engine's control: read within its bounds.
    let (run, mut rest) = bytes.split_first_chunk::<8>()?;
    if u64::from_le_bytes(*run) != w.run() {
        return None;
    }
    let mut items = Vec::new();
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_le_bytes(*len) as usize;
        let item = tail.get(..len)?;
        items.push(item.to_vec());
        rest = &tail[len..];
    }
    if items.is_empty() {
        return None;
    }
    let name = items.remove(0);
    Some((name, items, now_ms().saturating_sub(w.started_ms())))
}

/// SCRIPT KILL (`eval`) or FUNCTION KILL: asks the running script to stop,
/// with Redis's replies (`scriptKill`).
pub(crate) fn kill(store: &Store, eval: bool) -> Result<(), CmdError> {
    loop {
        let now = store.config_word(SCRIPT_BUSY)?;
        let w = Word(now);
        if now == 0 || !runner_alive(store, w) {
            return Err(CmdError::msg(NOTBUSY));
        }
        if w.has(WROTE) {
            return Err(CmdError::msg(UNKILLABLE));
        }
        if eval && w.has(FUNCTION) {
            return Err(CmdError::msg(BUSY_FUNCTION));
        }
        if !eval && !w.has(FUNCTION) {
            return Err(CmdError::msg(BUSY_EVAL));
        }
        if store.swap_config_word(SCRIPT_BUSY, now, now | KILL)? {
            return Ok(());
        }
    }
}

/// SHUTDOWN while a script of another worker is busy: refused unless
/// NOSAVE (Redis's rule), and then the script is asked to stop.
pub(crate) fn shutdown(
    store: &Store,
    slot: u32,
    threshold_ms: u64,
    nosave: bool,
) -> Result<(), CmdError> {
    let w = Word(store.config_word(SCRIPT_BUSY)?);
    // This worker's own script is busy only while its hook serves the
    // other clients: SHUTDOWN comes from one of them.
    let text = match gate(store, slot, threshold_ms) {
        Gate::Busy(text) => text,
        _ if w.0 != 0 && w.slot() == slot => own_busy_error(store),
        _ => return Ok(()),
    };
    if !nosave {
        return Err(CmdError::msg(text));
    }
    while let Ok(now) = store.config_word(SCRIPT_BUSY) {
        if now == 0 || store.swap_config_word(SCRIPT_BUSY, now, now | SHUTDOWN)? {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_names_its_run_whatever_its_requests() {
        let w = Word(RUNNING | FUNCTION | (3 << SLOT_SHIFT) | (12345 << START_SHIFT));
        assert_eq!(w.slot(), 3);
        assert_eq!(w.started_ms(), 12345);
        assert!(w.has(FUNCTION));
        assert_eq!(Word(w.0 | KILL | WROTE).run(), w.run());
    }
}
