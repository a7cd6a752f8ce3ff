//! `shoal serve`: creates or attaches the segment, starts one worker process
//! per slot, restarts a worker that dies (the data stays in the segment), and
//! on SIGTERM/SIGINT asks every worker to drain and waits for them.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::rc::Rc;
use std::time::{Duration, Instant};

use engine::Config;
use rustix::process::{kill_process, Pid, Signal};
use store::{Location, OpenOptions, Store, WorkerState, MAX_WORKERS};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::LocalSet;

use crate::error::{io, Error};
use crate::listener;

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
    pub persist: Option<crate::persistence::PersistOptions>,
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

/// Where `shoal ctl` reaches the supervisor of the segment at `segment`.
pub fn control_socket_path(segment: &std::path::Path) -> PathBuf {
    let mut s = segment.as_os_str().to_owned();
    s.push(".ctl");
    PathBuf::from(s)
}

/// A worker that dies this soon after starting counts as failing to start.
const FAST_EXIT: Duration = Duration::from_secs(2);
/// Consecutive fast exits after which the supervisor gives up.
const MAX_FAST_EXITS: u32 = 5;
/// How long workers get to drain before they are killed.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

struct Supervisor {
    exe: PathBuf,
    segment: PathBuf,
    config: Config,
    stopping: Cell<bool>,
    pids: RefCell<Vec<Option<u32>>>,
    failure: RefCell<Option<String>>,
    stop: tokio::sync::Notify,
    store: Store,
}

/// Runs the supervisor until SIGTERM/SIGINT (or SHUTDOWN from a client).
pub fn serve(opts: ServeOptions) -> Result<(), Error> {
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
    let me = std::process::id();
    if let Some(pid) = store.supervisor_pid()? {
        if pid != me {
            return Err(Error::Config(format!(
                "segment {} is already served by shoal (supervisor pid {pid})",
                store.path().display()
            )));
        }
    }
    // Fail here, with one clear message, rather than in every worker.
    let cfg = &opts.config;
    for port in [cfg.port, cfg.memcached_port, cfg.http_port] {
        if port != 0 {
            drop(listener::reuseport_tcp(listener::resolve(
                &cfg.bind, port,
            )?)?);
        }
    }
    if cfg.memcached_udp_port != 0 {
        drop(listener::reuseport_udp(listener::resolve(
            &cfg.bind,
            cfg.memcached_udp_port,
        )?)?);
    }
    store.set_supervisor_pid(me)?;
    let persistence = match &opts.persist {
        Some(p) => match crate::persistence::start(&store, p) {
            Ok(running) => Some(running),
            Err(e) => {
                let _ = store.set_supervisor_pid(0);
                return Err(e);
            }
        },
        None => {
            store.handle()?.log_ring().disable()?;
            None
        }
    };
    let sup = Rc::new(Supervisor {
        exe: std::env::current_exe().map_err(io("find the shoal executable"))?,
        segment: store.path().to_path_buf(),
        config: opts.config.clone(),
        stopping: Cell::new(false),
        pids: RefCell::new(vec![None; opts.workers as usize]),
        failure: RefCell::new(None),
        stop: tokio::sync::Notify::new(),
        store: store.clone(),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("start the event loop"))?;
    let result = LocalSet::new().block_on(&rt, supervise(sup, store.clone(), opts));
    if let Some(p) = persistence {
        p.stop();
        println!("shoal: log flushed");
    }
    let _ = store.set_supervisor_pid(0);
    result
}

async fn supervise(sup: Rc<Supervisor>, store: Store, opts: ServeOptions) -> Result<(), Error> {
    let info = store.info()?;
    println!(
        "shoal {} supervisor pid {}: segment {} ({} MiB{})",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        info.path,
        info.segment_bytes >> 20,
        if store.created() {
            ", created"
        } else {
            ", attached"
        },
    );
    let mut tasks = Vec::new();
    for slot in 0..opts.workers {
        tasks.push(tokio::task::spawn_local(keep_worker(sup.clone(), slot)));
    }
    let mut term = signal(SignalKind::terminate()).map_err(io("install SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io("install SIGINT handler"))?;
    let ready = wait_ready(&store, opts.workers);
    tokio::select! {
        ok = ready => if ok {
            let cfg = &opts.config;
            let mut what = Vec::new();
            if cfg.port != 0 {
                what.push(format!("redis on {}:{}", cfg.bind, cfg.port));
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
            println!("shoal ready: {} ({} workers)", what.join(", "), opts.workers);
        },
        _ = sup.stop.notified() => {}
        _ = term.recv() => sup.stopping.set(true),
        _ = int.recv() => sup.stopping.set(true),
    }
    if !sup.stopping.get() {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = sup.stop.notified() => {}
        }
    }
    sup.stopping.set(true);
    println!("shoal: stopping workers");
    signal_workers(&sup, Signal::TERM);
    let all = futures_join(tasks);
    if tokio::time::timeout(DRAIN_TIMEOUT, all).await.is_err() {
        eprintln!("shoal: workers did not drain in time; killing them");
        signal_workers(&sup, Signal::KILL);
    }
    println!("shoal: stopped");
    match sup.failure.borrow_mut().take() {
        Some(msg) => Err(Error::Config(msg)),
        None => Ok(()),
    }
}

/// Waits for every task (no extra crate for a join of a few handles).
async fn futures_join(tasks: Vec<tokio::task::JoinHandle<()>>) {
    for t in tasks {
        let _ = t.await;
    }
}

/// True once `n` workers serve; false if that takes too long.
async fn wait_ready(store: &Store, n: u32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let serving = store
            .workers()
            .map(|ws| {
                ws.iter()
                    .filter(|w| w.state == WorkerState::Serving)
                    .count()
            })
            .unwrap_or(0);
        if serving >= n as usize {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::future::pending().await
}

fn signal_workers(sup: &Supervisor, sig: Signal) {
    for pid in sup.pids.borrow().iter().flatten() {
        if let Some(pid) = Pid::from_raw(*pid as i32) {
            let _ = kill_process(pid, sig);
        }
    }
}

/// Starts the worker of `slot` and starts it again whenever it dies, until
/// the supervisor stops.
async fn keep_worker(sup: Rc<Supervisor>, slot: u32) {
    let mut fast_exits = 0;
    while !sup.stopping.get() {
        let started = Instant::now();
        let status = match run_child(&sup, slot).await {
            Ok(status) => status.to_string(),
            Err(e) => e.to_string(),
        };
        // Publishers stop routing to the dead worker's subscribers now, not
        // when its successor starts.
        let _ = sup.store.pubsub_reset(slot);
        if sup.stopping.get() {
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
}

async fn run_child(sup: &Supervisor, slot: u32) -> Result<ExitStatus, Error> {
    let cfg = &sup.config;
    let mut cmd = tokio::process::Command::new(&sup.exe);
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
    let mut child = cmd.spawn().map_err(io("start a worker"))?;
    sup.pids.borrow_mut()[slot as usize] = child.id();
    let status = child.wait().await.map_err(io("wait for a worker"));
    sup.pids.borrow_mut()[slot as usize] = None;
    status
}
