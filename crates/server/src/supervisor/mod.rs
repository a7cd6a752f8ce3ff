//! `shoal serve`: creates or attaches the segment, binds every listening
//! socket, starts the worker processes and hands each its sockets, restarts
//! a worker that dies (the data stays in the segment, the sockets in the
//! supervisor), answers `shoal ctl` (see `control`): scale, rolling upgrade,
//! simultaneous execution; and on SIGTERM/SIGINT asks every worker to drain
//! and waits for them.
//!
//! Workers live in registry slots. A slot's listeners outlive its worker: a
//! restarted or upgraded worker takes the same sockets, so their accept
//! queues never close and no queued connection is reset.

mod backlog;
mod control;
mod link;
pub(crate) mod listener;
pub mod persistence;
mod relay;
pub mod replication;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::rc::Rc;
use std::time::{Duration, Instant};

use engine::Config;
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};
use store::{Location, OpenOptions, Store, WorkerState, MAX_WORKERS};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::LocalSet;

use crate::channel::{control_socket_path, Channel};
use crate::error::{io, Error};
use listener::ListenerSet;

/// What `shoal serve` was asked for.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Worker processes to run.
    pub workers: u32,
    /// Where the segment is.
    pub location: Location,
    /// Segment size when it is created.
    pub memory: u64,
    /// Settings every worker runs with.
    pub config: Config,
    /// Persistence (`--dir`); None = off.
    pub persist: Option<crate::supervisor::persistence::PersistOptions>,
    /// How connections are spread over the workers.
    pub balance: Balance,
    /// Parameters from a redis.conf-style start, applied to the segment
    /// before any worker starts (as if by CONFIG SET).
    pub startup: Option<engine::startup::StartupConfig>,
    /// Permissions of the Unix socket (Redis's `unixsocketperm`).
    pub unixsocket_perm: Option<u32>,
    /// `--replicaof HOST:PORT` (or the configuration file's `replicaof`).
    pub replicaof: Option<(String, u16)>,
}

/// How connections are spread over the workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Balance {
    /// One SO_REUSEPORT listener per worker: the kernel hashes each new
    /// connection to one of them, busy or not.
    #[default]
    Reuseport,
    /// One listening socket shared by every worker: only a worker whose
    /// event loop is free accepts, so a blocked worker takes no one.
    Shared,
}

impl Balance {
    /// The name `--balance` takes and `ctl status` prints.
    pub fn name(self) -> &'static str {
        match self {
            Balance::Reuseport => "reuseport",
            Balance::Shared => "shared",
        }
    }

    /// The mode called `name`.
    pub fn from_name(name: &str) -> Option<Balance> {
        match name {
            "reuseport" => Some(Balance::Reuseport),
            "shared" => Some(Balance::Shared),
            _ => None,
        }
    }
}

/// A worker that dies this soon after starting counts as failing to start.
const FAST_EXIT: Duration = Duration::from_secs(2);
/// Consecutive fast exits after which the supervisor gives up.
const MAX_FAST_EXITS: u32 = 5;
/// How long workers get to drain before they are killed.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a new worker gets to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long CONFIG SET port / bind waits for each other worker to serve
/// the moved listeners.
const LISTEN_ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// One registry slot the supervisor keeps a worker in.
pub(crate) struct Slot {
    /// The sockets its worker serves (shared with a replacement during an
    /// upgrade, and with every slot under `--balance shared`).
    pub listeners: Rc<ListenerSet>,
    /// The binary its worker runs.
    pub binary: PathBuf,
    /// The running worker's pid.
    pub pid: Option<u32>,
    /// The version the worker reported when it connected.
    pub version: String,
    /// The worker's control channel, once it connected.
    pub channel: Option<Rc<Channel>>,
    /// Being removed: its worker is not started again.
    pub retiring: bool,
    /// Its keeper task ended (the worker exited and will not be restarted).
    pub ended: bool,
}

pub(crate) struct Supervisor {
    /// The binary new workers run (an upgrade changes it).
    pub exe: RefCell<PathBuf>,
    pub segment: PathBuf,
    pub config: RefCell<Config>,
    pub balance: Balance,
    pub started: Instant,
    pub stopping: Cell<bool>,
    failure: RefCell<Option<String>>,
    pub stop: tokio::sync::Notify,
    pub store: Store,
    /// The one set every worker serves under `--balance shared` (after a
    /// re-exec, taken back from the first worker that reconnects).
    pub shared: RefCell<Option<Rc<ListenerSet>>>,
    /// The Unix socket, one for every set.
    pub unix: RefCell<Option<Rc<OwnedFd>>>,
    /// Slots in use, by slot number.
    pub slots: RefCell<HashMap<u32, Slot>>,
    /// Under `--balance reuseport`: the kernel's array of each port's
    /// SO_REUSEPORT group, mirrored (a socket joins at the end when it
    /// listens; one that closes is replaced by the last), so that a
    /// program can steer connections away from a worker being removed.
    groups: RefCell<HashMap<listener::Kind, Vec<RawFd>>>,
    /// Whether `groups` matches the kernel. After a re-exec it is rebuilt
    /// from the old image's order once every worker has reconnected
    /// (`resumed_groups` holds that order by slot until then).
    groups_known: Cell<bool>,
    pub resumed_groups: RefCell<HashMap<listener::Kind, Vec<u32>>>,
    /// Set by `ctl upgrade --supervisor`: the binary to re-execute.
    pub reexec: RefCell<Option<PathBuf>>,
    /// Commands per second of each worker pid, sampled every second.
    pub rates: RefCell<HashMap<u32, f64>>,
    /// One scale or upgrade at a time.
    pub changing: tokio::sync::Mutex<()>,
    /// Replies awaited from workers (`ctl exec`), by request id.
    pub pending: RefCell<HashMap<u64, tokio::sync::oneshot::Sender<Value>>>,
    pub next_request: Cell<u64>,
    /// Every check that can refuse the start (configuration, TLS,
    /// listeners) has passed and the workers run: from now on the segment
    /// holds what they serve.
    pub workers_started: Cell<bool>,
}

/// A segment this start created, removed with its side files when the start
/// is refused (a port in use, a bad TLS setting): a refused start leaves
/// nothing in /dev/shm, as a refused redis-server leaves no file.
struct FreshSegment(Option<PathBuf>);

impl FreshSegment {
    fn keep(&mut self) {
        self.0 = None;
    }
}

impl Drop for FreshSegment {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = engine::remove_side_files(&path);
            let _ = std::fs::remove_file(crate::channel::control_socket_path(&path));
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Runs the supervisor until SIGTERM/SIGINT (or SHUTDOWN from a client).
/// A failure is also logged on stdout as redis-server logs it (harnesses
/// written for Redis read its stdout, e.g. for "Failed listening on port").
pub fn serve(opts: ServeOptions) -> Result<(), Error> {
    let result = serve_until_stopped(opts);
    if let Err(e) = &result {
        crate::redislog::log('M', crate::redislog::level::WARNING, &e.to_string());
    }
    result
}

fn serve_until_stopped(opts: ServeOptions) -> Result<(), Error> {
    let resumed = take_resume_state();
    if opts.workers == 0 || opts.workers > MAX_WORKERS {
        return Err(Error::Config(format!(
            "--workers must be between 1 and {MAX_WORKERS}, not {}",
            opts.workers
        )));
    }
    let store = Store::open(&OpenOptions {
        location: opts.location.clone(),
        size: opts.memory,
        create: true,
        ..OpenOptions::default()
    })?;
    let mut fresh =
        FreshSegment((store.created() && resumed.is_none()).then(|| store.path().to_path_buf()));
    let me = std::process::id();
    if let Some(pid) = store.supervisor_pid()? {
        if pid != me {
            return Err(Error::Config(format!(
                "segment {} is already served by shoal (supervisor pid {pid})",
                store.path().display()
            )));
        }
    }
    if let Some(startup) = &opts.startup {
        startup
            .apply(&store)
            .map_err(|e| Error::Config(format!("applying the configuration: {e}")))?;
    }
    // As Redis: a TLS listener whose settings do not load fails the start
    // (and as memcached: an auth file that does not read).
    let text = store.config_text()?;
    let auth_file = engine::setting_in(&text, "memcached-auth-file").unwrap_or_default();
    if !auth_file.is_empty() {
        engine::memcache_auth::AuthFile::load(&auth_file)
            .map_err(|why| Error::Config(format!("Could not load memcached-auth-file {why}")))?;
    }
    let tls = crate::tls::TlsSettings::from_text(&text);
    if tls.wanted(opts.config.tls_port) {
        crate::tls::server_config(&tls)
            .map_err(|why| Error::Config(format!("Failed to configure TLS: {why}")))?;
    }
    // Every socket is bound here, so a port in use fails the start with one
    // clear message rather than in every worker.
    // After a re-exec the workers still hold every socket and give them
    // back when they reconnect.
    let cfg = &opts.config;
    let unix = if cfg.unixsocket.is_empty() || resumed.is_some() {
        None
    } else {
        let socket = listener::unix(cfg.unixsocket.as_ref())?;
        if let Some(mode) = opts.unixsocket_perm {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&cfg.unixsocket, std::fs::Permissions::from_mode(mode))
                .map_err(io(format!("set the permissions of {}", cfg.unixsocket)))?;
        }
        Some(Rc::new(OwnedFd::from(socket)))
    };
    let shared = match opts.balance {
        Balance::Shared if resumed.is_none() => {
            Some(Rc::new(ListenerSet::bind(cfg, false, unix.clone())?))
        }
        _ => None,
    };
    if store.created() && resumed.is_none() {
        // A new segment starts with none of the files an earlier one of the
        // same name left beside it (scripts, functions, a replica's link
        // status): before replication writes its status file anew.
        let _ = engine::remove_side_files(store.path());
    }
    let control_path = control_socket_path(store.path());
    let control = crate::supervisor::control::bind(&control_path)?;
    store.set_supervisor_pid(me)?;
    let persistence = match &opts.persist {
        Some(p) => match crate::supervisor::persistence::start(&store, p) {
            Ok(running) => Some(running),
            Err(e) => {
                let _ = store.set_supervisor_pid(0);
                let _ = std::fs::remove_file(&control_path);
                return Err(e);
            }
        },
        None => {
            store.handle()?.log_ring().disable()?;
            None
        }
    };
    let replication = crate::supervisor::replication::start(
        &store,
        opts.persist.as_ref().map(|p| p.dir.clone()),
        opts.config.port,
        opts.replicaof.clone(),
    )?;
    let sup = Rc::new(Supervisor {
        exe: RefCell::new(std::env::current_exe().map_err(io("find the shoal executable"))?),
        segment: store.path().to_path_buf(),
        config: RefCell::new(opts.config.clone()),
        balance: opts.balance,
        started: Instant::now(),
        stopping: Cell::new(false),
        failure: RefCell::new(None),
        stop: tokio::sync::Notify::new(),
        store: store.clone(),
        shared: RefCell::new(shared),
        unix: RefCell::new(unix),
        slots: RefCell::new(HashMap::new()),
        groups: RefCell::new(HashMap::new()),
        groups_known: Cell::new(true),
        resumed_groups: RefCell::new(HashMap::new()),
        reexec: RefCell::new(None),
        rates: RefCell::new(HashMap::new()),
        changing: tokio::sync::Mutex::new(()),
        pending: RefCell::new(HashMap::new()),
        next_request: Cell::new(1),
        workers_started: Cell::new(false),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("start the event loop"))?;
    let result = LocalSet::new().block_on(&rt, async {
        let control = tokio::net::UnixListener::from_std(control)
            .map_err(io(format!("listen on {}", control_path.display())))?;
        tokio::task::spawn_local(crate::supervisor::control::accept(sup.clone(), control));
        tokio::task::spawn_local(sample_rates(sup.clone()));
        supervise(sup.clone(), store.clone(), opts, resumed).await
    });
    drop(rt);
    if sup.workers_started.get() {
        fresh.keep();
    }
    let _ = std::fs::remove_file(&control_path);
    replication.stop();
    if let Some(p) = persistence {
        p.stop();
        println!("shoal: log flushed");
    }
    match result {
        Ok(Some((binary, state))) => {
            drop(store);
            reexec(&binary, &state)
        }
        Ok(None) => {
            let _ = store.set_supervisor_pid(0);
            Ok(())
        }
        Err(e) => {
            let _ = store.set_supervisor_pid(0);
            Err(e)
        }
    }
}

/// The environment variable that carries a supervisor's state into the
/// binary it re-executes.
const RESUME_STATE: &str = "SHOAL_SUPERVISOR_STATE";

/// The state a re-executed supervisor was handed, if it was (and removes
/// it from the environment, so workers do not inherit it).
fn take_resume_state() -> Option<Value> {
    let text = std::env::var(RESUME_STATE).ok()?;
    std::env::remove_var(RESUME_STATE);
    serde_json::from_str(&text).ok()
}

/// Replaces this process's image with `binary`, same arguments, same pid:
/// the workers stay its children and reconnect to the new image's control
/// socket with their listening sockets. Returns only if exec failed.
fn reexec(binary: &std::path::Path, state: &Value) -> Result<(), Error> {
    use std::os::unix::process::CommandExt;
    println!("shoal: supervisor re-executing {}", binary.display());
    let err = std::process::Command::new(binary)
        .args(std::env::args_os().skip(1))
        .env(RESUME_STATE, state.to_string())
        .exec();
    Err(Error::Io(format!("re-execute {}", binary.display()), err))
}

/// Runs until the supervisor stops (`Ok(None)`, workers drained) or
/// re-executes (`Ok(Some((binary, state)))`, workers left running).
async fn supervise(
    sup: Rc<Supervisor>,
    store: Store,
    opts: ServeOptions,
    resumed: Option<Value>,
) -> Result<Option<(PathBuf, Value)>, Error> {
    // The segment's size from its file: `Store::info` walks the arena and
    // can report damage it sees mid-write while the workers of a
    // re-executed supervisor run on, which must not stop the supervisor.
    let bytes = std::fs::metadata(store.path()).map_or(0, |m| m.len());
    println!(
        "shoal {} supervisor pid {}: segment {} ({} MiB{}), balance {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        store.path().display(),
        bytes >> 20,
        if store.created() {
            ", created"
        } else {
            ", attached"
        },
        opts.balance.name(),
    );
    let started = match &resumed {
        Some(state) => sup.resume(state),
        None => {
            let mut started = Vec::new();
            for _ in 0..opts.workers {
                started.push(sup.add_slot(None)?);
            }
            started
        }
    };
    sup.workers_started.set(true);
    let mut term = signal(SignalKind::terminate()).map_err(io("install SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io("install SIGINT handler"))?;
    if resumed.is_none() {
        // Every listener is bound by now (a port in use failed above).
        crate::redislog::log(
            'M',
            crate::redislog::level::NOTICE,
            &format!(
                "Running mode=standalone, port={}, shoal {} supervisor PID: {}",
                opts.config.port,
                env!("CARGO_PKG_VERSION"),
                std::process::id()
            ),
        );
    }
    let ready = sup.wait_serving(&started);
    tokio::select! {
        ok = ready => if ok.is_ok() {
            let cfg = &opts.config;
            let mut what = Vec::new();
            if cfg.port != 0 {
                what.push(format!("redis on {}:{}", cfg.bind, cfg.port));
            }
            if cfg.tls_port != 0 {
                what.push(format!("redis over tls on {}:{}", cfg.bind, cfg.tls_port));
            }
            if !cfg.unixsocket.is_empty() {
                what.push(format!("redis on unix socket {}", cfg.unixsocket));
            }
            if cfg.memcached_port != 0 {
                what.push(format!("memcached on {}:{}", cfg.bind, cfg.memcached_port));
            }
            if cfg.memcached_udp_port != 0 {
                what.push(format!("memcached udp on {}:{}", cfg.bind, cfg.memcached_udp_port));
            }
            if cfg.http_port != 0 {
                what.push(format!("http on {}:{}", cfg.bind, cfg.http_port));
            }
            if cfg.nats_port != 0 {
                what.push(format!("nats on {}:{}", cfg.bind, cfg.nats_port));
            }
            if resumed.is_some() {
                println!("shoal: supervisor upgraded; workers reconnected: {}", started.len());
            } else {
                println!("shoal ready: {} ({} workers)", what.join(", "), opts.workers);
                crate::redislog::log('M', crate::redislog::level::NOTICE, "Ready to accept connections");
            }
        },
        _ = sup.stop.notified() => {}
        _ = term.recv() => sup.stopping.set(true),
        _ = int.recv() => sup.stopping.set(true),
    }
    if !sup.stopping.get() && sup.reexec.borrow().is_none() {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = sup.stop.notified() => {}
        }
    }
    let reexec = sup.reexec.borrow_mut().take();
    if let Some(binary) = reexec {
        // Let the `ctl` reply go out before the control socket closes.
        tokio::time::sleep(Duration::from_millis(50)).await;
        return Ok(Some((binary, sup.resume_state())));
    }
    sup.stopping.set(true);
    println!("shoal: stopping workers");
    sup.signal_workers(Signal::TERM);
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while !sup.slots.borrow().values().all(|s| s.ended) {
        if Instant::now() > deadline {
            eprintln!("shoal: workers did not drain in time; killing them");
            sup.signal_workers(Signal::KILL);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("shoal: stopped");
    crate::redislog::log(
        'M',
        crate::redislog::level::WARNING,
        "shoal is now ready to exit, bye bye...",
    );
    match sup.failure.borrow_mut().take() {
        Some(msg) => Err(Error::Config(msg)),
        None => Ok(None),
    }
}

/// Keeps `rates` current: each worker's commands per second over the last
/// second, from its registry counter.
async fn sample_rates(sup: Rc<Supervisor>) {
    let mut last: HashMap<u32, (Instant, u64)> = HashMap::new();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = Instant::now();
        let mut rates = HashMap::new();
        let mut seen = HashMap::new();
        for w in sup.store.workers().unwrap_or_default() {
            if let Some((at, commands)) = last.get(&w.pid) {
                let secs = now.duration_since(*at).as_secs_f64().max(1e-3);
                rates.insert(w.pid, w.commands.saturating_sub(*commands) as f64 / secs);
            }
            seen.insert(w.pid, (now, w.commands));
        }
        last = seen;
        *sup.rates.borrow_mut() = rates;
    }
}

impl Supervisor {
    /// Workers that are kept running (not being removed).
    pub fn wanted(&self) -> usize {
        self.kept_slots().len()
    }

    /// The slots whose workers are kept running, in order.
    fn kept_slots(&self) -> Vec<u32> {
        let mut kept: Vec<u32> = self
            .slots
            .borrow()
            .iter()
            .filter(|(_, s)| !s.retiring && !s.ended)
            .map(|(n, _)| *n)
            .collect();
        kept.sort_unstable();
        kept
    }

    /// Takes a free slot and starts a worker in it, serving `listeners`
    /// (a new set, or the shared one, when None).
    pub fn add_slot(self: &Rc<Self>, listeners: Option<Rc<ListenerSet>>) -> Result<u32, Error> {
        let free = (0..MAX_WORKERS).find(|n| !self.slots.borrow().contains_key(n));
        let Some(slot) = free else {
            return Err(Error::Config(format!(
                "every one of the {MAX_WORKERS} worker slots is in use"
            )));
        };
        let shared = self.shared.borrow().clone();
        let listeners = match (listeners, shared) {
            (Some(l), _) => l,
            (None, Some(shared)) => shared,
            (None, None) => {
                let unix = self.unix.borrow().clone();
                let set = Rc::new(ListenerSet::bind(&self.config.borrow(), true, unix)?);
                let mut groups = self.groups.borrow_mut();
                for (kind, fd) in set.tcp() {
                    groups.entry(kind).or_default().push(fd.as_raw_fd());
                }
                set
            }
        };
        self.slots.borrow_mut().insert(
            slot,
            Slot {
                listeners,
                binary: self.exe.borrow().clone(),
                pid: None,
                version: String::new(),
                channel: None,
                retiring: false,
                ended: false,
            },
        );
        tokio::task::spawn_local(keep_worker(self.clone(), slot));
        Ok(slot)
    }

    /// Waits until the workers of `slots` all serve; an error names the
    /// first that did not within [`START_TIMEOUT`] or whose keeper gave up.
    pub async fn wait_serving(&self, slots: &[u32]) -> Result<(), Error> {
        let start = Instant::now();
        loop {
            let serving: Vec<u32> = self
                .store
                .workers()
                .unwrap_or_default()
                .into_iter()
                .filter(|w| w.state == WorkerState::Serving)
                .map(|w| w.pid)
                .collect();
            let pending = slots.iter().find(|n| {
                let slots = self.slots.borrow();
                let s = slots.get(n);
                !s.and_then(|s| s.pid).is_some_and(|pid| {
                    serving.contains(&pid) && s.is_some_and(|s| s.channel.is_some())
                })
            });
            let Some(&slot) = pending else {
                return Ok(());
            };
            let ended = self.slots.borrow().get(&slot).is_none_or(|s| s.ended);
            if ended || start.elapsed() > START_TIMEOUT || self.stopping.get() {
                return Err(Error::Config(format!(
                    "worker {slot} did not start serving"
                )));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Removes `slot`: its worker drains and exits and is not started
    /// again. Its listeners close when no other slot serves them; any
    /// connection still queued on them then goes to another worker.
    pub async fn retire(&self, slot: u32) {
        let (pid, channel, listeners) = {
            let mut slots = self.slots.borrow_mut();
            let Some(s) = slots.get_mut(&slot) else {
                return;
            };
            s.retiring = true;
            (s.pid, s.channel.clone(), s.listeners.clone())
        };
        // Its listeners close with it when no other slot serves them (an
        // upgrade's new worker does): new connections go to the other
        // members of each group from now on.
        let closing = !self.served_by_another(slot, &listeners);
        if closing && self.balance == Balance::Reuseport {
            self.steer_away_from(&listeners);
        }
        // Over the channel the worker hands its idle clients over; a
        // signal (no channel yet) only drains it.
        let asked = match channel {
            Some(c) => c
                .send(&json!({"op": "drain", "handover": true}), &[])
                .await
                .is_ok(),
            None => false,
        };
        if !asked {
            if let Some(pid) = pid.and_then(|p| Pid::from_raw(p as i32)) {
                let _ = kill_process(pid, Signal::TERM);
            }
        }
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while !self.slots.borrow().get(&slot).is_none_or(|s| s.ended) {
            if Instant::now() > deadline {
                if let Some(pid) = pid.and_then(|p| Pid::from_raw(p as i32)) {
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.slots.borrow_mut().remove(&slot);
        if closing {
            // The last slot serving these listeners is gone: what is still
            // queued goes to another worker, then they close (the slots
            // held the only references).
            crate::supervisor::control::hand_over_queued(self, listeners.clone()).await;
            self.leave_groups(&listeners);
            drop(listeners);
            self.steer_away_from_none();
        }
    }

    /// A worker ran CONFIG SET port / bind and moved its own sockets of the
    /// kinds in `moved` to `sockets` (bound at `bind`/`port`): its set
    /// takes them, every other set gets its own new sockets (or, under
    /// `--balance shared`, these same ones), and every other worker is
    /// sent its set's. The old sockets close as their last holder drops
    /// them. Returns once every other worker said it serves the new ones
    /// (or [`LISTEN_ACK_TIMEOUT`] passed), so that the CONFIG SET replies
    /// only when no worker accepts on the old addresses any more.
    pub async fn listeners_moved(
        &self,
        from: &Channel,
        origin: *const ListenerSet,
        msg: &Value,
        sockets: Vec<(listener::Kind, OwnedFd)>,
    ) {
        let moved: Vec<listener::Kind> = msg["moved"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().and_then(listener::Kind::from_name))
            .collect();
        let cfg = {
            let mut cfg = self.config.borrow_mut();
            if let Some(bind) = msg["bind"].as_str() {
                cfg.bind = bind.to_string();
            }
            if let Some(port) = msg["port"].as_u64() {
                cfg.port = port as u16;
            }
            if let Some(port) = msg["tls_port"].as_u64() {
                cfg.tls_port = port as u16;
            }
            cfg.clone()
        };
        let sockets: Vec<_> = sockets
            .into_iter()
            .map(|(k, fd)| (k, Rc::new(fd)))
            .collect();
        // Each distinct set once, the one the CONFIG SET ran on first.
        let mut sets: Vec<Rc<ListenerSet>> = Vec::new();
        for s in self.slots.borrow().values() {
            if !sets.iter().any(|x| Rc::ptr_eq(x, &s.listeners)) {
                sets.push(s.listeners.clone());
            }
        }
        sets.sort_by_key(|set| !std::ptr::eq(Rc::as_ptr(set), origin));
        let mut replaced = Vec::new();
        for set in sets {
            let new = if std::ptr::eq(Rc::as_ptr(&set), origin) || self.balance == Balance::Shared {
                sockets.clone()
            } else {
                match listener::bind_kinds(&cfg, &moved, true) {
                    Ok(bound) => bound.into_iter().map(|(k, fd)| (k, Rc::new(fd))).collect(),
                    Err(e) => {
                        eprintln!(
                            "shoal: CONFIG SET port/bind: {e}; a worker keeps its old listeners"
                        );
                        continue;
                    }
                }
            };
            replaced.push((set.clone(), Rc::new(set.replacing(&moved, new))));
        }
        {
            let mut groups = self.groups.borrow_mut();
            for kind in &moved {
                groups.remove(kind);
            }
            for (_, new) in &replaced {
                for (kind, fd) in new.tcp() {
                    if moved.contains(&kind) {
                        groups.entry(kind).or_default().push(fd.as_raw_fd());
                    }
                }
            }
        }
        let mut sends = Vec::new();
        {
            let mut slots = self.slots.borrow_mut();
            for s in slots.values_mut() {
                let Some((_, new)) = replaced
                    .iter()
                    .find(|(old, _)| Rc::ptr_eq(old, &s.listeners))
                else {
                    continue;
                };
                s.listeners = new.clone();
                if let Some(channel) = &s.channel {
                    if !std::ptr::eq(Rc::as_ptr(channel), from) {
                        sends.push((channel.clone(), new.clone()));
                    }
                }
            }
            let mut shared = self.shared.borrow_mut();
            if let Some(old) = shared.as_ref() {
                if let Some((_, new)) = replaced.iter().find(|(o, _)| Rc::ptr_eq(o, old)) {
                    *shared = Some(new.clone());
                }
            }
        }
        let mut acks = Vec::new();
        for (channel, set) in sends {
            let mine: Vec<_> = set
                .sockets
                .iter()
                .filter(|(k, _)| moved.contains(k))
                .collect();
            let kinds: Vec<&str> = mine.iter().map(|(k, _)| k.name()).collect();
            let fds: Vec<_> = mine.iter().map(|(_, fd)| fd.as_fd()).collect();
            let id = self.next_request.get();
            self.next_request.set(id + 1);
            let (tx, rx) = tokio::sync::oneshot::channel();
            self.pending.borrow_mut().insert(id, tx);
            let msg = json!({
                "op": "listen",
                "id": id,
                "moved": moved.iter().map(|k| k.name()).collect::<Vec<_>>(),
                "kinds": kinds,
                "bind": cfg.bind,
                "port": cfg.port,
                "tls_port": cfg.tls_port,
            });
            if channel.send(&msg, &fds).await.is_ok() {
                acks.push((id, rx));
            } else {
                self.pending.borrow_mut().remove(&id);
            }
        }
        for (id, rx) in acks {
            let _ = tokio::time::timeout(LISTEN_ACK_TIMEOUT, rx).await;
            self.pending.borrow_mut().remove(&id);
        }
    }

    /// Whether a slot other than `slot` serves `listeners`.
    fn served_by_another(&self, slot: u32, listeners: &Rc<ListenerSet>) -> bool {
        self.slots
            .borrow()
            .iter()
            .any(|(n, s)| *n != slot && Rc::ptr_eq(&s.listeners, listeners))
    }

    /// Steers each port's new connections to the sockets of the slots that
    /// stay, away from `leaving` (its worker drains, its queue empties).
    fn steer_away_from(&self, leaving: &ListenerSet) {
        if !self.groups_known.get() {
            eprintln!("shoal: the reuseport groups' order is unknown since a worker was lost in a supervisor upgrade; connections queued on the removed worker may be reset");
            return;
        }
        let staying: Vec<RawFd> = self
            .slots
            .borrow()
            .values()
            .filter(|s| !s.retiring && !s.ended)
            .flat_map(|s| {
                s.listeners
                    .tcp()
                    .map(|(_, fd)| fd.as_raw_fd())
                    .collect::<Vec<_>>()
            })
            .collect();
        let groups = self.groups.borrow();
        for (kind, fd) in leaving.tcp() {
            let Some(group) = groups.get(&kind) else {
                continue;
            };
            let targets: Vec<u32> = (0..group.len() as u32)
                .filter(|i| staying.contains(&group[*i as usize]))
                .collect();
            if let Err(e) = listener::steer(fd, Some(&targets)) {
                eprintln!("shoal: {e}; connections queued on the removed worker may be reset");
            }
        }
    }

    /// Gives connection spreading back to the kernel's hash, once no
    /// listener is being removed.
    fn steer_away_from_none(&self) {
        let slots = self.slots.borrow();
        if slots.values().any(|s| s.retiring && !s.ended) {
            return;
        }
        if let Some(s) = slots.values().next() {
            for (_, fd) in s.listeners.tcp() {
                let _ = listener::steer(fd, None);
            }
        }
    }

    /// Mirrors the kernel as `set`'s sockets close: each one's place in its
    /// group goes to the group's last socket.
    fn leave_groups(&self, set: &ListenerSet) {
        let mut groups = self.groups.borrow_mut();
        for (kind, fd) in set.tcp() {
            if let Some(group) = groups.get_mut(&kind) {
                if let Some(i) = group.iter().position(|g| *g == fd.as_raw_fd()) {
                    group.swap_remove(i);
                }
            }
        }
    }

    /// Changes the number of workers to `n`; returns the number before.
    pub async fn scale(self: &Rc<Self>, n: u32) -> Result<usize, Error> {
        if n == 0 || n > MAX_WORKERS {
            return Err(Error::Config(format!(
                "the number of workers must be between 1 and {MAX_WORKERS}, not {n}"
            )));
        }
        let _one = self.changing.lock().await;
        let before = self.wanted();
        let n = n as usize;
        if n > before {
            let mut added = Vec::new();
            for _ in before..n {
                added.push(self.add_slot(None)?);
            }
            if let Err(e) = self.wait_serving(&added).await {
                for slot in added {
                    self.retire(slot).await;
                }
                return Err(e);
            }
        } else {
            for slot in self.kept_slots().into_iter().skip(n).rev() {
                self.retire(slot).await;
            }
        }
        Ok(before)
    }

    /// Replaces every worker, one at a time, with one running `binary`: the
    /// new worker takes the old one's listeners and serves before the old
    /// one drains, so no connection is refused. Returns (slot, old pid,
    /// new pid, ms) for each.
    pub async fn upgrade(self: &Rc<Self>, binary: PathBuf) -> Result<Vec<Value>, Error> {
        if !binary.is_file() {
            return Err(Error::Config(format!("{} is not a file", binary.display())));
        }
        let _one = self.changing.lock().await;
        *self.exe.borrow_mut() = binary.clone();
        let mut replaced = Vec::new();
        for slot in self.kept_slots() {
            let began = Instant::now();
            let Some((listeners, old_pid)) = self
                .slots
                .borrow()
                .get(&slot)
                .map(|s| (s.listeners.clone(), s.pid))
            else {
                continue;
            };
            let new = self.add_slot(Some(listeners))?;
            if let Err(e) = self.wait_serving(&[new]).await {
                self.retire(new).await;
                return Err(e);
            }
            let new_pid = self.slots.borrow().get(&new).and_then(|s| s.pid);
            self.retire(slot).await;
            replaced.push(json!({
                "slot": new,
                "old_slot": slot,
                "old_pid": old_pid,
                "new_pid": new_pid,
                "ms": began.elapsed().as_secs_f64() * 1e3,
            }));
        }
        Ok(replaced)
    }

    /// What a re-executed image needs: the slots with their workers and
    /// binaries, and each reuseport group's order (as the slots whose
    /// sockets fill it).
    fn resume_state(&self) -> Value {
        let slots = self.slots.borrow();
        let live: Vec<Value> = slots
            .iter()
            .filter(|(_, s)| !s.ended && s.pid.is_some())
            .map(
                |(n, s)| json!({"slot": n, "pid": s.pid, "binary": s.binary, "version": s.version}),
            )
            .collect();
        let mut groups = serde_json::Map::new();
        for (kind, fds) in self.groups.borrow().iter() {
            let order: Vec<Option<u32>> = fds
                .iter()
                .map(|fd| {
                    slots
                        .iter()
                        .find(|(_, s)| s.listeners.tcp().any(|(_, f)| f.as_raw_fd() == *fd))
                        .map(|(n, _)| *n)
                })
                .collect();
            groups.insert(kind.name().into(), json!(order));
        }
        json!({
            "exe": *self.exe.borrow(),
            "slots": live,
            "groups": groups,
            "groups_known": self.groups_known.get(),
        })
    }

    /// Takes over the workers the previous image left running; their
    /// sockets arrive when each reconnects (see `control`).
    fn resume(self: &Rc<Self>, state: &Value) -> Vec<u32> {
        if let Some(exe) = state["exe"].as_str() {
            *self.exe.borrow_mut() = PathBuf::from(exe);
        }
        let mut resumed = Vec::new();
        for w in state["slots"].as_array().into_iter().flatten() {
            let (Some(slot), Some(pid)) = (w["slot"].as_u64(), w["pid"].as_u64()) else {
                continue;
            };
            let slot = slot as u32;
            self.slots.borrow_mut().insert(
                slot,
                Slot {
                    listeners: Rc::new(ListenerSet::default()),
                    binary: w["binary"]
                        .as_str()
                        .map(PathBuf::from)
                        .unwrap_or_else(|| self.exe.borrow().clone()),
                    pid: Some(pid as u32),
                    version: w["version"].as_str().unwrap_or("").to_string(),
                    channel: None,
                    retiring: false,
                    ended: false,
                },
            );
            tokio::task::spawn_local(keep_worker(self.clone(), slot));
            resumed.push(slot);
        }
        let mut order = HashMap::new();
        for (name, slots) in state["groups"].as_object().into_iter().flatten() {
            let Some(kind) = listener::Kind::from_name(name) else {
                continue;
            };
            let slots: Option<Vec<u32>> = slots
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| s.as_u64().map(|s| s as u32))
                .collect();
            match slots {
                Some(slots) => {
                    order.insert(kind, slots);
                }
                None => self.groups_known.set(false),
            }
        }
        if state["groups_known"] == false {
            self.groups_known.set(false);
        }
        if self.balance == Balance::Reuseport && self.groups_known.get() {
            // Known again once every worker has given its sockets back.
            self.groups_known.set(false);
            *self.resumed_groups.borrow_mut() = order;
        }
        resumed
    }

    /// A resumed worker gave its sockets back: they become its slot's set
    /// (or the shared set), and once every resumed worker has, the
    /// reuseport groups' order is known again.
    pub fn resumed_sockets(&self, slot: u32, set: ListenerSet) {
        let set = Rc::new(set);
        if let Some((_, fd)) = set.sockets.iter().find(|(k, _)| *k == listener::Kind::Unix) {
            self.unix.borrow_mut().get_or_insert_with(|| fd.clone());
        }
        let set = match self.balance {
            Balance::Shared => self.shared.borrow_mut().get_or_insert(set).clone(),
            Balance::Reuseport => set,
        };
        if let Some(s) = self.slots.borrow_mut().get_mut(&slot) {
            s.listeners = set;
        }
        let order = self.resumed_groups.borrow();
        if order.is_empty() {
            return;
        }
        let slots = self.slots.borrow();
        let mut groups = HashMap::new();
        for (kind, members) in order.iter() {
            let mut fds = Vec::new();
            for member in members {
                let fd = slots.get(member).and_then(|s| {
                    s.listeners
                        .tcp()
                        .find(|(k, _)| k == kind)
                        .map(|(_, fd)| fd.as_raw_fd())
                });
                match fd {
                    Some(fd) => fds.push(fd),
                    None => return,
                }
            }
            groups.insert(*kind, fds);
        }
        drop(slots);
        drop(order);
        *self.groups.borrow_mut() = groups;
        self.resumed_groups.borrow_mut().clear();
        self.groups_known.set(true);
    }

    fn signal_workers(&self, sig: Signal) {
        for s in self.slots.borrow().values() {
            if let Some(pid) = s.pid.and_then(|p| Pid::from_raw(p as i32)) {
                let _ = kill_process(pid, sig);
            }
        }
    }
}

/// Starts the worker of `slot` and starts it again whenever it dies, until
/// the supervisor stops or the slot is removed.
async fn keep_worker(sup: Rc<Supervisor>, slot: u32) {
    let mut fast_exits = 0;
    let retiring = |sup: &Supervisor| sup.slots.borrow().get(&slot).is_none_or(|s| s.retiring);
    // A worker a previous image of this process started: still our child,
    // but not a tokio `Child`, so its exit is polled.
    let inherited = sup.slots.borrow().get(&slot).and_then(|s| s.pid);
    if let Some(pid) = inherited.and_then(|p| Pid::from_raw(p as i32)) {
        let status = loop {
            match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG) {
                Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
                Ok(Some((_, status))) => break format!("{status:?}"),
                Err(e) => break e.to_string(),
            }
        };
        if !sup.stopping.get() && !retiring(&sup) {
            eprintln!("shoal: worker {slot} exited ({status}); starting it again");
        }
        if let Some(s) = sup.slots.borrow_mut().get_mut(&slot) {
            s.pid = None;
            s.channel = None;
        }
        let _ = sup.store.pubsub_reset(slot);
    }
    while !sup.stopping.get() && !retiring(&sup) {
        let started = Instant::now();
        let status = match run_child(&sup, slot).await {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        };
        // Publishers stop routing to the dead worker's subscribers now, not
        // when its successor starts.
        let _ = sup.store.pubsub_reset(slot);
        if sup.stopping.get() || retiring(&sup) {
            break;
        }
        fast_exits = if started.elapsed() < FAST_EXIT {
            fast_exits + 1
        } else {
            0
        };
        if fast_exits >= MAX_FAST_EXITS {
            let msg = format!("worker {slot} keeps failing ({status}); giving up");
            eprintln!("shoal: {msg}");
            *sup.failure.borrow_mut() = Some(msg);
            sup.stopping.set(true);
            sup.stop.notify_one();
            break;
        }
        eprintln!("shoal: worker {slot} exited ({status}); starting it again");
        tokio::time::sleep(Duration::from_millis(50 * fast_exits as u64)).await;
    }
    if let Some(s) = sup.slots.borrow_mut().get_mut(&slot) {
        s.ended = true;
    }
}

async fn run_child(sup: &Supervisor, slot: u32) -> Result<ExitStatus, Error> {
    let cfg = sup.config.borrow().clone();
    let binary = match sup.slots.borrow().get(&slot) {
        Some(s) => s.binary.clone(),
        None => return Err(Error::Config(format!("slot {slot} is gone"))),
    };
    let mut cmd = tokio::process::Command::new(&binary);
    cmd.arg("worker")
        .arg("--slot")
        .arg(slot.to_string())
        .arg("--segment")
        .arg(&sup.segment)
        .arg("--port")
        .arg(cfg.port.to_string())
        .arg("--memcached-port")
        .arg(cfg.memcached_port.to_string())
        .arg("--memcached-udp-port")
        .arg(cfg.memcached_udp_port.to_string())
        .arg("--http-port")
        .arg(cfg.http_port.to_string())
        .arg("--nats-port")
        .arg(cfg.nats_port.to_string())
        .arg("--nats-max-payload")
        .arg(cfg.nats_max_payload.to_string())
        .arg("--item-size-max")
        .arg(cfg.item_size_max.to_string())
        .arg("--bind")
        .arg(&cfg.bind)
        .arg("--hz")
        .arg(cfg.hz.to_string())
        .arg("--maxclients")
        .arg(cfg.maxclients.to_string())
        // Its own process group: a terminal's Ctrl-C reaches the supervisor,
        // which then drains the workers in order.
        .process_group(0)
        .kill_on_drop(false);
    if !cfg.unixsocket.is_empty() {
        cmd.arg("--unixsocket").arg(&cfg.unixsocket);
    }
    if !cfg.config_file.is_empty() {
        cmd.arg("--config-file").arg(&cfg.config_file);
    }
    let mut child = cmd
        .spawn()
        .map_err(io(format!("start a worker ({})", binary.display())))?;
    if let Some(s) = sup.slots.borrow_mut().get_mut(&slot) {
        s.pid = child.id();
        s.channel = None;
    }
    let status = child.wait().await.map_err(io("wait for a worker"));
    if let Some(s) = sup.slots.borrow_mut().get_mut(&slot) {
        s.pid = None;
        s.channel = None;
    }
    status
}
