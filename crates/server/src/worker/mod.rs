//! A worker process: attaches the segment, takes its slot in the worker
//! registry, binds the shared RESP port (SO_REUSEPORT) and serves clients on
//! one tokio `current_thread` loop until SIGTERM/SIGINT, then drains: it stops
//! accepting, lets every connection finish the replies in flight, and exits.

mod batch;
mod blocking;
mod bus;
mod busy;
mod clients;
mod connection;
mod durable;
mod http;
mod memcache;
mod nats;
mod pause;
mod pubsub;
mod rebinds;
mod sync_replicas;
mod tracking_acks;
mod transport;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use engine::{Config, Engine, ServerInfo, Session};
use serde_json::json;
use store::{Handle, Location, Message, OpenOptions, Store, WorkerState};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::LocalSet;

use crate::channel::Channel;
use crate::channel::Kind;
use crate::error::{io, Error};
use crate::simultaneous;
use crate::worker::blocking::Blocking;
use crate::worker::clients::Clients;
use crate::worker::transport::Transport;
use bus::Bus;

/// How a worker is started (the supervisor passes these on its command line).
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// Registry slot (also names its mailbox).
    pub slot: u32,
    /// The segment file to attach.
    pub segment: PathBuf,
    /// Settings (port, bind, limits).
    pub config: Config,
}

/// Everything the tasks of one worker share (one thread, so `Rc`/`RefCell`;
/// a `RefCell` is never held across an `.await`).
pub(crate) struct Worker {
    pub slot: u32,
    pub store: Store,
    pub engine: RefCell<Engine>,
    /// A second store context for mailbox traffic, so that sending never
    /// needs the engine's handle.
    pub bus_handle: RefCell<Handle>,
    pub bus: Bus,
    pub clients: Clients,
    /// Clients waiting in BLPOP & co.
    pub blocking: Blocking,
    /// Clients held by CLIENT PAUSE.
    pub pause: crate::worker::pause::Pause,
    pub shutdown: watch::Sender<bool>,
    /// Signalled when pub/sub messages wait for a full ring to drain.
    pub backlog_pending: tokio::sync::Notify,
    /// Signalled by the engine when pub/sub output appears.
    pub pubsub_output: Rc<tokio::sync::Notify>,
    /// Replies held for the log's fsync (`appendfsync always`).
    pub durable: crate::worker::durable::Durable,
    /// Replies held for replicas (`replica-sync-count`).
    pub replica_acks: crate::worker::sync_replicas::ReplicaAcks,
    /// Replies held for other workers' client-side caching invalidations.
    pub tracking_acks: crate::worker::tracking_acks::TrackingAcks,
    /// CONFIG SET port / bind replies held until every worker moved.
    pub rebinds: crate::worker::rebinds::Rebinds,
    /// The channel to the supervisor (set once connected).
    pub control: RefCell<Option<Rc<Channel>>>,
    /// Copies of the listening sockets, to give back to a supervisor that
    /// re-executed (it holds none of them then).
    pub sockets: RefCell<Vec<(Kind, OwnedFd)>>,
    /// This drain hands idle connections to another worker (an upgrade or
    /// a scale-down) instead of closing them (a shutdown).
    pub handover: std::cell::Cell<bool>,
    /// Connection tasks still running, counted until each has handed its
    /// connection over or closed it: a descriptor the process drops as it
    /// exits would reset its client.
    connection_tasks: std::cell::Cell<usize>,
    /// The TLS configuration new handshakes use.
    tls: RefCell<crate::tls::Acceptor>,
    /// The task serving each listening socket, to stop when the socket
    /// moves (CONFIG SET port / bind) or the worker drains.
    accepting: RefCell<Vec<(Kind, tokio::task::JoinHandle<()>)>>,
    /// Whether every worker serves the same sockets (`--balance shared`).
    shared_listeners: std::cell::Cell<bool>,
    /// The addresses and ports the sockets listen on.
    listen: RefCell<Config>,
}

/// Held by each connection task for its whole life (see
/// `Worker::connection_tasks`).
struct ConnectionTask(Rc<Worker>);

impl ConnectionTask {
    fn new(worker: &Rc<Worker>) -> ConnectionTask {
        worker
            .connection_tasks
            .set(worker.connection_tasks.get() + 1);
        ConnectionTask(worker.clone())
    }
}

impl Drop for ConnectionTask {
    fn drop(&mut self) {
        let tasks = &self.0.connection_tasks;
        tasks.set(tasks.get() - 1);
    }
}

impl Worker {
    /// Whether a draining connection should move to another worker.
    pub fn hands_over(&self) -> bool {
        self.handover.get() && self.control.borrow().is_some()
    }

    /// Other live workers' slots.
    pub fn peers(&self) -> Vec<u32> {
        self.store
            .workers()
            .unwrap_or_default()
            .into_iter()
            .filter(|w| w.slot != self.slot)
            .map(|w| w.slot)
            .collect()
    }
}

/// Runs a worker until it is told to stop.
pub fn run_worker(opts: WorkerOptions) -> Result<(), Error> {
    let store = Store::open(&OpenOptions {
        location: Location::Path(opts.segment.clone()),
        create: false,
        ..OpenOptions::default()
    })?;
    store.register_worker(opts.slot, opts.config.port)?;
    let info = ServerInfo {
        worker: opts.slot,
        port: opts.config.port,
        executable: std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        config_file: opts.config.config_file.clone(),
        run_id: engine::replication::read_status(store.path())["node"]
            .as_str()
            .filter(|id| id.len() == 40)
            .map_or_else(run_id, str::to_string),
    };
    let engine = Engine::new(store.clone(), opts.config.clone(), info)?;
    let bus_handle = store.handle()?;
    let bus = Bus::new(opts.slot, &opts.segment.display().to_string())?;
    let blocking = Blocking::new(opts.slot, store.clone())?;
    let (shutdown, _) = watch::channel(false);
    let store_for_durable = store.clone();
    let worker = Rc::new(Worker {
        slot: opts.slot,
        store,
        engine: RefCell::new(engine),
        bus_handle: RefCell::new(bus_handle),
        bus,
        clients: Clients::default(),
        blocking,
        pause: Default::default(),
        shutdown,
        backlog_pending: tokio::sync::Notify::new(),
        pubsub_output: Rc::new(tokio::sync::Notify::new()),
        durable: crate::worker::durable::Durable::new(&store_for_durable),
        replica_acks: crate::worker::sync_replicas::ReplicaAcks::new(&store_for_durable),
        tracking_acks: Default::default(),
        rebinds: Default::default(),
        control: RefCell::new(None),
        sockets: RefCell::new(Vec::new()),
        handover: std::cell::Cell::new(false),
        connection_tasks: std::cell::Cell::new(0),
        tls: RefCell::new(crate::tls::Acceptor::default()),
        accepting: RefCell::new(Vec::new()),
        shared_listeners: std::cell::Cell::new(false),
        listen: RefCell::new(opts.config.clone()),
    });
    let rebinding = Rc::downgrade(&worker);
    worker
        .engine
        .borrow_mut()
        .set_rebind(Box::new(move |old, new| match rebinding.upgrade() {
            Some(worker) => rebind(&worker, old, new),
            None => Err("the worker is stopping".into()),
        }));
    worker
        .engine
        .borrow_mut()
        .set_tls_check(Box::new(crate::tls::check_text));
    let output = worker.pubsub_output.clone();
    worker
        .engine
        .borrow_mut()
        .pubsub()
        .set_on_output(Box::new(move || output.notify_one()));
    // A busy script's hook answers this worker's other clients.
    let busy_server = busy::server(Rc::downgrade(&worker));
    worker.engine.borrow_mut().set_busy_server(busy_server);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("start the event loop"))?;
    LocalSet::new().block_on(&rt, serve(worker, opts))
}

/// 40 hex digits for INFO's `run_id` when the supervisor published none:
/// it names the supervisor's run (one for every worker, as Sentinel
/// expects of one server), kept in the replication status file.
fn run_id() -> String {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
        ^ ((std::process::id() as u128) << 64);
    let mut x = seed as u64 | 1;
    (0..5)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            format!("{:08x}", x as u32)
        })
        .collect()
}

async fn serve(worker: Rc<Worker>, opts: WorkerOptions) -> Result<(), Error> {
    let (channel, sockets, shared) = connect_supervisor(&worker, &opts).await?;
    worker.shared_listeners.set(shared);
    serve_sockets(&worker, &[], sockets)?;
    *worker.control.borrow_mut() = Some(channel.clone());
    tokio::task::spawn_local(control_loop(worker.clone(), channel));
    let wake = worker.bus.bind()?;
    worker.bus_handle.borrow_mut().mailbox_reset(worker.slot)?;
    // A predecessor in this slot may have died with subscribers.
    worker.store.pubsub_reset(worker.slot)?;
    tokio::task::spawn_local(pubsub::flush_backlog(worker.clone()));
    tokio::task::spawn_local(pubsub::pump(worker.clone()));
    tokio::task::spawn_local(mailbox_loop(worker.clone(), wake));
    tokio::task::spawn_local(send_ready(worker.clone()));
    tokio::task::spawn_local(sweeper(worker.clone()));
    tokio::task::spawn_local(lazy_free(worker.clone()));
    tokio::task::spawn_local(crate::worker::pause::timer(worker.clone()));
    tokio::task::spawn_local(crate::worker::pause::announce(worker.clone()));
    worker
        .store
        .set_worker_state(worker.slot, WorkerState::Serving)?;

    let mut term = signal(SignalKind::terminate()).map_err(io("install SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(io("install SIGINT handler"))?;
    let mut stop = worker.shutdown.subscribe();
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = stop.wait_for(|s| *s) => {}
    }
    // Drain: no new connections; connections finish what they have read and
    // close; then exit.
    worker
        .store
        .set_worker_state(worker.slot, WorkerState::Draining)?;
    for (_, task) in worker.accepting.take() {
        task.abort();
    }
    // Connections finish the requests they have read, then close (see
    // `connection::run`); a connection stuck writing to a client that does
    // not read is cut after the wait below.
    let _ = worker.shutdown.send(true);
    connections_ended(&worker, DRAIN_WAIT).await;
    worker.clients.kill_all();
    // Killed connections close at once; hand-overs and lingering closes
    // already under way finish (each is bounded by `connection::LINGER`).
    connections_ended(&worker, connection::LINGER + Duration::from_millis(500)).await;
    // Every blocked client left with its connection; a straggler's bits
    // would only cost other workers needless messages.
    let _ = worker.store.clear_waiters(worker.slot);
    let _ = worker.store.pubsub_reset(worker.slot);
    worker
        .store
        .set_worker_state(worker.slot, WorkerState::Free)?;
    Ok(())
}

/// Serves `sockets` in place of those of the kinds in `replaced` (all
/// new at start): stops their accept tasks and keeps copies of the new
/// ones to give back to a re-executed supervisor.
fn serve_sockets(
    worker: &Rc<Worker>,
    replaced: &[Kind],
    sockets: Vec<(Kind, OwnedFd)>,
) -> Result<(), Error> {
    worker.accepting.borrow_mut().retain(|(kind, task)| {
        let keep = !replaced.contains(kind);
        if !keep {
            task.abort();
        }
        keep
    });
    worker
        .sockets
        .borrow_mut()
        .retain(|(kind, _)| !replaced.contains(kind));
    for (kind, fd) in &sockets {
        if let Ok(copy) = fd.try_clone() {
            worker.sockets.borrow_mut().push((*kind, copy));
        }
    }
    let shared = worker.shared_listeners.get();
    for (kind, fd) in sockets {
        let what = format!("serve the {} listener", kind.name());
        let task = match kind {
            Kind::MemcachedUdp => {
                let socket = std::net::UdpSocket::from(fd);
                socket.set_nonblocking(true).map_err(io(what.clone()))?;
                let s = tokio::net::UdpSocket::from_std(socket).map_err(io(what))?;
                tokio::task::spawn_local(memcache::serve_udp(worker.clone(), s))
            }
            Kind::Unix => {
                let l = std::os::unix::net::UnixListener::from(fd);
                l.set_nonblocking(true).map_err(io(what.clone()))?;
                let l = tokio::net::UnixListener::from_std(l).map_err(io(what))?;
                tokio::task::spawn_local(accept_unix(worker.clone(), l))
            }
            Kind::Redis | Kind::RedisTls | Kind::Memcached | Kind::Http | Kind::Nats => {
                let l = std::net::TcpListener::from(fd);
                l.set_nonblocking(true).map_err(io(what))?;
                tokio::task::spawn_local(accept_tcp(worker.clone(), l, kind, shared))
            }
        };
        worker.accepting.borrow_mut().push((kind, task));
    }
    Ok(())
}

/// CONFIG SET port / bind on this worker: binds the new sockets here (an
/// address or port that cannot be bound refuses the change, nothing
/// moved), serves them at once in place of the old ones, and sends them
/// to the supervisor, which keeps them and moves every other worker too.
/// The old sockets close once no worker and not the supervisor holds them.
fn rebind(
    worker: &Rc<Worker>,
    old: &engine::ListenAddress,
    new: &engine::ListenAddress,
) -> Result<(), String> {
    use crate::supervisor::listener::{bind_kinds, moved_kinds};
    let kinds = moved_kinds(old, new);
    let mut cfg = worker.listen.borrow().clone();
    cfg.bind.clone_from(&new.bind);
    cfg.port = new.port;
    cfg.tls_port = new.tls_port;
    let reuseport = !worker.shared_listeners.get();
    let sockets = bind_kinds(&cfg, &kinds, reuseport).map_err(|e| {
        let why = format!(
            "Failed to move the listeners to {}:{}: {e}",
            new.bind, new.port
        );
        crate::redislog::log('M', crate::redislog::level::WARNING, &why);
        why
    })?;
    let copies: Vec<(Kind, OwnedFd)> = sockets
        .iter()
        .filter_map(|(kind, fd)| fd.try_clone().ok().map(|c| (*kind, c)))
        .collect();
    serve_sockets(worker, &kinds, sockets).map_err(|e| e.to_string())?;
    *worker.listen.borrow_mut() = cfg;
    if let Some(channel) = worker.control.borrow().clone() {
        let msg = json!({
            "op": "rebound",
            "rebind": worker.rebinds.sent(),
            "moved": kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
            "kinds": copies.iter().map(|(k, _)| k.name()).collect::<Vec<_>>(),
            "bind": new.bind,
            "port": new.port,
            "tls_port": new.tls_port,
        });
        tokio::task::spawn_local(async move {
            let fds: Vec<_> = copies.iter().map(|(_, fd)| fd.as_fd()).collect();
            let _ = channel.send(&msg, &fds).await;
        });
    }
    Ok(())
}

/// The supervisor moved this worker's sockets (another worker ran CONFIG
/// SET port / bind): serves the new ones in place of the moved kinds.
fn listen_moved(worker: &Rc<Worker>, msg: &serde_json::Value, fds: Vec<OwnedFd>) {
    let names = |field: &str| -> Vec<Kind> {
        msg[field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().and_then(Kind::from_name))
            .collect()
    };
    let (moved, kinds) = (names("moved"), names("kinds"));
    if kinds.len() != fds.len() {
        return;
    }
    {
        let mut listen = worker.listen.borrow_mut();
        if let Some(bind) = msg["bind"].as_str() {
            listen.bind = bind.to_string();
        }
        if let Some(port) = msg["port"].as_u64() {
            listen.port = port as u16;
        }
        if let Some(port) = msg["tls_port"].as_u64() {
            listen.tls_port = port as u16;
        }
    }
    let _ = serve_sockets(worker, &moved, kinds.into_iter().zip(fds).collect());
}

/// Accepts connections of `kind` until the worker drains. Under
/// `--balance shared` every free worker is woken for each connection and
/// the first to call accept takes it; one that already serves more than its
/// share lets the others go first, so that connections spread evenly.
async fn accept_tcp(worker: Rc<Worker>, listener: std::net::TcpListener, kind: Kind, shared: bool) {
    // tokio's TcpListener cannot wait for a connection without taking it,
    // which the shared queue's turn-taking needs. `with_interest` is
    // deprecated because a `T` that does not own its descriptor could close
    // it while registered; a TcpListener owns its descriptor, so this use
    // is sound.
    #[allow(deprecated)]
    let Ok(listener) = AsyncFd::with_interest(listener, Interest::READABLE) else {
        return;
    };
    loop {
        let Ok(mut ready) = listener.readable().await else {
            return;
        };
        if shared {
            listener_turn(&worker).await;
        }
        match listener.get_ref().accept() {
            Ok((stream, peer)) => {
                let stream = stream
                    .set_nonblocking(true)
                    .and_then(|()| tokio::net::TcpStream::from_std(stream));
                if let Ok(stream) = stream {
                    serve_stream(&worker, kind, stream, peer, None);
                }
            }
            // Another worker took it (shared queue), or nothing is left.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => ready.clear_ready(),
            // Out of file descriptors and the like: back off, do not spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Under `--balance shared`, once a connection waits: waits a moment when
/// this worker has more connections than the least loaded serving worker,
/// so that one wins the race to accept. Never long: a busy peer must not
/// hold a client up.
async fn listener_turn(worker: &Worker) {
    let counts = worker.store.serving_connections().unwrap_or_default();
    let mine = counts.iter().find(|(slot, _)| *slot == worker.slot);
    let least = counts.iter().map(|(_, n)| *n).min();
    if let (Some((_, mine)), Some(least)) = (mine, least) {
        if *mine > least {
            tokio::time::sleep(SHARED_YIELD).await;
        }
    }
}

/// Waits until no connection task runs, or `within` has passed.
async fn connections_ended(worker: &Worker, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    while worker.connection_tasks.get() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How long a draining worker lets its connections finish the requests they
/// have read before it closes them.
const DRAIN_WAIT: Duration = Duration::from_secs(5);

/// How long a worker with more than its share of connections lets the
/// others accept first under `--balance shared`.
const SHARED_YIELD: Duration = Duration::from_micros(500);

/// Starts serving an accepted (or handed-over) TCP connection of `kind`;
/// `moved` is the state of a client handed over by another worker.
fn serve_stream(
    worker: &Rc<Worker>,
    kind: Kind,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    moved: Option<serde_json::Value>,
) {
    let _ = stream.set_nodelay(true);
    let local = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let fd = stream.as_raw_fd();
    let resp_peer = (peer.to_string(), local, fd);
    match kind {
        Kind::Nats => spawn_connection(worker, |worker| nats::run(worker, stream, resp_peer)),
        Kind::Redis | Kind::Unix | Kind::MemcachedUdp => {
            // While one of this worker's scripts is busy, its hook answers
            // the plain RESP clients (`busy.rs`).
            let registered = busy::register(fd as i64, stream.as_fd());
            spawn_connection(worker, |worker| async move {
                let _registered = registered;
                if let Some((stream, state)) =
                    connection::run(worker.clone(), stream, resp_peer, moved).await
                {
                    if let Ok(stream) = stream.into_std() {
                        if state.get("replica").is_some() {
                            hand_to_replication(&worker, OwnedFd::from(stream), state).await;
                        } else {
                            hand_over(&worker, kind, OwnedFd::from(stream), state).await;
                        }
                    }
                }
            });
        }
        Kind::RedisTls | Kind::Memcached | Kind::Http => {
            // The TLS configuration is taken at accept time: a certificate
            // changed by CONFIG SET serves the next handshake.
            let (config, settings) = worker.tls.borrow_mut().current(&worker.store);
            let tls = match kind {
                Kind::Memcached => settings.memcached,
                Kind::Http => settings.http,
                _ => true,
            };
            if tls && config.is_none() {
                // TLS asked for but not configured (the reason was logged):
                // the connection closes rather than go out in the clear.
                return;
            }
            spawn_connection(worker, |worker| async move {
                let transport = match config.filter(|_| tls) {
                    Some(config) => match Transport::accept_tls(config, stream).await {
                        Some(t) => t,
                        None => return,
                    },
                    None => Transport::Plain(stream),
                };
                match kind {
                    Kind::Memcached => memcache::serve_tcp(worker, transport).await,
                    Kind::Http => http::serve(worker, transport, peer).await,
                    // A TLS session cannot move to another worker: a
                    // draining worker closes it gracefully (see
                    // `connection::run`).
                    _ => {
                        // While one of this worker's scripts is busy, its
                        // hook answers the client through the session.
                        let registered = match &transport {
                            Transport::Tls(tls) => Some(busy::register_tls(fd as i64, tls)),
                            Transport::Plain(_) => None,
                        };
                        let ended =
                            connection::run(worker.clone(), transport, resp_peer, moved).await;
                        drop(registered);
                        if let Some((transport, state)) = ended {
                            if state.get("replica").is_some() {
                                pump_replica_link(&worker, transport, state).await;
                            }
                        }
                    }
                }
            });
        }
    }
}

/// Runs the task `serve` makes for one connection, counted in
/// `Worker::connection_tasks` until it ends.
fn spawn_connection<F>(worker: &Rc<Worker>, serve: impl FnOnce(Rc<Worker>) -> F)
where
    F: std::future::Future<Output = ()> + 'static,
{
    let task = ConnectionTask::new(worker);
    let serve = serve(worker.clone());
    tokio::task::spawn_local(async move {
        serve.await;
        drop(task);
    });
}

/// Starts serving a Unix-socket connection (accepted or handed over).
fn serve_unix(
    worker: &Rc<Worker>,
    stream: tokio::net::UnixStream,
    path: String,
    moved: Option<serde_json::Value>,
) {
    let fd = stream.as_raw_fd();
    let registered = busy::register(fd as i64, stream.as_fd());
    spawn_connection(worker, |worker| async move {
        let peer = (format!("{path}:0"), path, fd);
        let _registered = registered;
        if let Some((stream, state)) = connection::run(worker.clone(), stream, peer, moved).await {
            if let Ok(stream) = stream.into_std() {
                hand_over(&worker, Kind::Unix, OwnedFd::from(stream), state).await;
            }
        }
    });
}

/// Gives an idle client connection and its state to the supervisor, which
/// passes them to another worker: the client sees no disconnect.
async fn hand_over(worker: &Worker, kind: Kind, fd: OwnedFd, state: serde_json::Value) {
    let channel = worker.control.borrow().clone();
    if let Some(channel) = channel {
        let msg = json!({"op": "handover", "kind": kind.name(), "state": state});
        let _ = channel.send(&msg, &[fd.as_fd()]).await;
    }
}

/// Gives a replica's link (SHOAL.SYNC) to the supervisor, whose sender
/// streams the log to it.
async fn hand_to_replication(worker: &Worker, fd: OwnedFd, state: serde_json::Value) {
    let channel = worker.control.borrow().clone();
    if let Some(channel) = channel {
        let msg = json!({"op": "replica", "link": state["replica"]});
        let _ = channel.send(&msg, &[fd.as_fd()]).await;
    }
}

/// Serves a replica's link (SHOAL.SYNC) that came over TLS: the session
/// cannot leave this process, so the supervisor's sender gets one end of
/// a socket pair and this task carries the bytes between the other end
/// and the session, both ways, until either side closes. A write to the
/// replica that stalls as long as the sender's own timeout closes it.
async fn pump_replica_link(worker: &Worker, transport: Transport, state: serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok((ours, sender)) = std::os::unix::net::UnixStream::pair() else {
        return;
    };
    if ours.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(ours) = tokio::net::UnixStream::from_std(ours) else {
        return;
    };
    hand_to_replication(worker, OwnedFd::from(sender), state).await;
    let (mut from_sender, mut to_sender) = ours.into_split();
    let (mut from_replica, mut to_replica) = tokio::io::split(transport);
    let down = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from_sender.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let written = tokio::time::timeout(REPLICA_LINK_TIMEOUT, async {
                to_replica.write_all(&buf[..n]).await?;
                to_replica.flush().await
            })
            .await;
            if !matches!(written, Ok(Ok(()))) {
                return;
            }
        }
        // The sender closed: so does the session (close_notify).
        let _ = tokio::time::timeout(REPLICA_LINK_TIMEOUT, to_replica.shutdown()).await;
    };
    let up = tokio::io::copy(&mut from_replica, &mut to_sender);
    tokio::select! {
        _ = down => {}
        _ = up => {}
    }
}

/// How long a write to a replica over TLS may stall (the supervisor's
/// sender gives a plain link as long).
const REPLICA_LINK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Connects to the supervisor's control socket, says which slot this is and
/// receives the listening sockets to serve (SCM_RIGHTS): the supervisor
/// owns them, so this worker's exit never closes an accept queue.
async fn connect_supervisor(
    worker: &Worker,
    opts: &WorkerOptions,
) -> Result<(Rc<Channel>, Vec<(Kind, OwnedFd)>, bool), Error> {
    let path = crate::channel::control_socket_path(&opts.segment);
    let what = format!("reach the supervisor at {}", path.display());
    let stream = tokio::net::UnixStream::connect(&path)
        .await
        .map_err(io(what.clone()))?;
    let channel = Rc::new(Channel::new(stream));
    let hello = json!({
        "hello": worker.slot,
        "pid": std::process::id(),
        "version": env!("CARGO_PKG_VERSION"),
    });
    channel.send(&hello, &[]).await.map_err(io(what.clone()))?;
    let (msg, fds) = channel
        .recv()
        .await
        .map_err(io(what.clone()))?
        .ok_or_else(|| {
            Error::Config(format!(
                "the supervisor at {} refused worker {}",
                path.display(),
                worker.slot
            ))
        })?;
    let kinds: Vec<Kind> = msg["kinds"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|k| k.as_str().and_then(Kind::from_name))
                .collect()
        })
        .unwrap_or_default();
    if kinds.len() != fds.len() {
        return Err(Error::Config(format!(
            "{what}: sockets do not match their kinds"
        )));
    }
    let shared = msg["shared"].as_bool().unwrap_or(false);
    Ok((channel, kinds.into_iter().zip(fds).collect(), shared))
}

/// Requests from the supervisor: `exec` (run a command at a given instant)
/// and `adopt` (serve a connection it hands over).
async fn control_loop(worker: Rc<Worker>, mut channel: Rc<Channel>) {
    loop {
        let Ok(Some((msg, mut fds))) = channel.recv().await else {
            // The supervisor re-executes (or died, and then this worker is
            // sent SIGTERM): connect to its new image.
            match reconnect(&worker).await {
                Some(c) => {
                    channel = c;
                    continue;
                }
                None => return,
            }
        };
        match msg["op"].as_str() {
            Some("exec") => {
                tokio::task::spawn_local(exec(worker.clone(), channel.clone(), msg));
            }
            Some("adopt") => {
                let kind = msg["kind"].as_str().and_then(Kind::from_name);
                let moved = msg.get("state").cloned();
                if let (Some(kind), Some(fd)) = (kind, fds.pop()) {
                    adopt(&worker, kind, fd, moved);
                }
            }
            Some("listen") => {
                listen_moved(&worker, &msg, fds);
                // After the aborted accept tasks dropped the old sockets.
                let ack = json!({"id": msg["id"]});
                let channel = channel.clone();
                tokio::task::spawn_local(async move {
                    tokio::task::yield_now().await;
                    let _ = channel.send(&ack, &[]).await;
                });
            }
            Some("rebound-done") => {
                let id = msg["rebind"].as_u64().unwrap_or(0);
                worker.rebinds.done(id);
            }
            Some("drain") => {
                worker
                    .handover
                    .set(msg["handover"].as_bool().unwrap_or(false));
                let _ = worker.shutdown.send(true);
            }
            _ => {}
        }
    }
}

/// Connects to a re-executed supervisor and gives it back this worker's
/// listening sockets; None if none answers within 30 s.
async fn reconnect(worker: &Worker) -> Option<Rc<Channel>> {
    let path = crate::channel::control_socket_path(worker.store.path());
    for _ in 0..1500 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let Ok(stream) = tokio::net::UnixStream::connect(&path).await else {
            continue;
        };
        let channel = Rc::new(Channel::new(stream));
        let (hello, fds) = {
            let sockets = worker.sockets.borrow();
            let kinds: Vec<&str> = sockets.iter().map(|(k, _)| k.name()).collect();
            let hello = json!({
                "hello": worker.slot,
                "pid": std::process::id(),
                "version": env!("CARGO_PKG_VERSION"),
                "resume": true,
                "kinds": kinds,
            });
            // Copies: the borrow of `sockets` ends before the send awaits.
            let copies = sockets.iter().map(|(_, fd)| fd.try_clone());
            (hello, copies.collect::<Result<Vec<_>, _>>())
        };
        let Ok(fds) = fds else {
            return None;
        };
        let borrowed: Vec<_> = fds.iter().map(|fd| fd.as_fd()).collect();
        if channel.send(&hello, &borrowed).await.is_ok() {
            *worker.control.borrow_mut() = Some(channel.clone());
            return Some(channel);
        }
    }
    None
}

/// Serves a connection the supervisor hands over (queued on a removed
/// worker's listener, or moved with its state from a draining worker).
fn adopt(worker: &Rc<Worker>, kind: Kind, fd: OwnedFd, moved: Option<serde_json::Value>) {
    if kind == Kind::Unix {
        let stream = std::os::unix::net::UnixStream::from(fd);
        let path = worker.engine.borrow().config().unixsocket.clone();
        if stream.set_nonblocking(true).is_ok() {
            if let Ok(stream) = tokio::net::UnixStream::from_std(stream) {
                serve_unix(worker, stream, path, moved);
            }
        }
        return;
    }
    let stream = std::net::TcpStream::from(fd);
    let peer = stream.peer_addr();
    if stream.set_nonblocking(true).is_ok() {
        if let (Ok(stream), Ok(peer)) = (tokio::net::TcpStream::from_std(stream), peer) {
            serve_stream(worker, kind, stream, peer, moved);
        }
    }
}

/// How long before an `exec` target the worker leaves its event loop.
const EXEC_LOOP_LEAD: Duration = Duration::from_millis(5);

/// Runs one `ctl exec` command: waits for its target instant (spinning on
/// CLOCK_MONOTONIC for the last stretch; target 0 = now), runs it as a
/// client of its own would, and reports when it started and what it
/// replied.
async fn exec(worker: Rc<Worker>, channel: Rc<Channel>, msg: serde_json::Value) {
    let target = msg["target_ns"].as_u64().unwrap_or(0);
    let argv: Vec<Vec<u8>> = msg["argv"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .map(|s| s.as_bytes().to_vec())
                .collect()
        })
        .unwrap_or_default();
    // Sleep on the event loop until shortly before the target, so the loop
    // keeps serving; then `spin_until` sleeps precisely (the loop's timer
    // has millisecond grain and may wake late) and spins the last stretch.
    let lead = EXEC_LOOP_LEAD.as_nanos() as u64;
    let now = simultaneous::monotonic_ns();
    if target > now + lead {
        tokio::time::sleep(Duration::from_nanos(target - now - lead)).await;
    }
    let mut out = Vec::new();
    let mut run = || {
        let start = simultaneous::spin_until(target);
        let mut engine = worker.engine.borrow_mut();
        let id = worker.store.next_client_id().unwrap_or(0);
        let mut session = Session::new(id, engine.now_ms());
        session.worker = worker.slot;
        let args: Vec<engine::command::Arg<'_>> =
            argv.iter().map(|a| a.as_slice().into()).collect();
        engine.execute(&mut session, &args, &mut out);
        start
    };
    let start = match msg["cpu"].as_u64() {
        Some(cpu) => simultaneous::on_cpu(cpu as usize, run),
        None => run(),
    };
    worker.flush_pubsub();
    let reply = json!({
        "id": msg["id"],
        "start_ns": start,
        "reply": String::from_utf8_lossy(&out),
    });
    let _ = channel.send(&reply, &[]).await;
}

async fn accept_unix(worker: Rc<Worker>, listener: tokio::net::UnixListener) {
    let path = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
        .unwrap_or_default();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => serve_unix(&worker, stream, path.clone(), None),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Active expiry: `hz` incremental sweeps per second, only while some key has
/// a time to live (an idle server with no expiring keys does no work).
async fn sweeper(worker: Rc<Worker>) {
    loop {
        let hz = worker.engine.borrow().config().hz.clamp(1, 500);
        tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
        worker.engine.borrow_mut().tick();
        // Looking up the keys would wait for another worker's script.
        if !worker.engine.borrow().script_running_elsewhere() {
            worker
                .blocking
                .serve_vanished_streams(&mut worker.engine.borrow_mut());
        }
        worker.flush_pubsub();
    }
}

/// Frees what this worker's lazy frees (UNLINK, FLUSHDB ASYNC…) detached,
/// a bounded number of blocks per step with the event loop served in
/// between, so the command that detached a large value answered at once
/// and no later request waits for the whole free. Looks for work once per
/// `hz` tick when there is none.
async fn lazy_free(worker: Rc<Worker>) {
    loop {
        if worker.engine.borrow_mut().free_lazily() {
            tokio::task::yield_now().await;
        } else {
            let hz = worker.engine.borrow().config().hz.clamp(1, 500);
            tokio::time::sleep(Duration::from_millis(1000 / hz)).await;
        }
    }
}

/// Tells other workers about written keys their blocked clients wait on
/// (the outbox `Blocking::serve_ready` fills), each message with its share
/// of its round's weight, and gives back to each round's origin the weight
/// not passed on (`blocking.rs`).
async fn send_ready(worker: Rc<Worker>) {
    loop {
        worker.blocking.outbox_ready.notified().await;
        let flush = worker.blocking.take_flush();
        let max = worker
            .bus_handle
            .borrow()
            .mailbox_max_payload()
            .min(32 << 10);
        let mut rounds: BTreeMap<u64, u64> = flush.held;
        for (round, slots) in flush.announce {
            let mut messages: Vec<(u32, u32, Vec<u8>)> = Vec::new();
            for (slot, keys) in slots {
                let (payloads, too_long) = bus::encode_keys(&keys, max);
                for p in payloads {
                    messages.push((slot, bus::KEY_READY, p));
                }
                for (db, key) in too_long {
                    let word = store::waiter_word(*db, key);
                    messages.push((slot, bus::WORD_READY, word.to_le_bytes().to_vec()));
                }
            }
            let held = rounds.remove(&round).unwrap_or(0);
            let (each, rest) = blocking::split_weight(held, messages.len() as u64);
            let request = blocking::round_request(round, each);
            if round != 0 {
                rounds.insert(round, rest);
            }
            for (slot, kind, p) in messages {
                worker
                    .bus
                    .send(&worker.bus_handle, slot, kind, request, &p)
                    .await;
            }
        }
        for (round, rest) in rounds {
            if rest == 0 || round == 0 {
                continue;
            }
            let origin = blocking::round_origin(round);
            if origin == worker.slot {
                worker.blocking.round_done(round, rest);
            } else {
                worker
                    .bus
                    .send(
                        &worker.bus_handle,
                        origin,
                        bus::ROUND_DONE,
                        round,
                        &rest.to_le_bytes(),
                    )
                    .await;
            }
        }
    }
}

/// Waits for wake-ups and handles the messages other workers left.
async fn mailbox_loop(worker: Rc<Worker>, wake: tokio::net::UnixDatagram) {
    let mut buf = [0u8; 64];
    let mut messages = Vec::new();
    // Fragments of large pub/sub messages, per sending worker.
    let mut partial = HashMap::new();
    loop {
        // Drain first: messages may have arrived before the socket was bound.
        messages.clear();
        // Pub/sub messages are delivered straight from the ring; the rest
        // are handled after (they may wait on other workers).
        let taken = {
            let mut engine = worker.engine.borrow_mut();
            worker.bus_handle.borrow_mut().mailbox_take_each(
                worker.slot,
                |kind, from, request, payload| {
                    if kind == engine::MAILBOX_MESSAGE || kind == engine::MAILBOX_FRAGMENT {
                        engine.receive_pubsub(kind, from, payload, &mut partial);
                    } else {
                        messages.push(Message {
                            kind,
                            from,
                            request,
                            payload: payload.to_vec(),
                        });
                    }
                },
            )
        };
        worker.flush_pubsub();
        let acks = worker.engine.borrow().tracking_acks_total();
        worker.tracking_acks.check(acks);
        if taken.is_ok() {
            for m in messages.drain(..) {
                handle_message(&worker, m).await;
            }
        }
        if wake.recv(&mut buf).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        while wake.try_recv(&mut buf).is_ok() {}
    }
}

async fn handle_message(worker: &Rc<Worker>, m: Message) {
    let now = worker.engine.borrow().now_ms();
    match m.kind {
        bus::LIST_REQUEST => {
            let ids = bus::decode_ids(&m.payload);
            let text = worker
                .clients
                .list(&ids, now, None, worker.engine.try_borrow().ok().as_deref())
                .into_bytes();
            let max = reply_piece_max(worker);
            let pieces: Vec<&[u8]> = if text.is_empty() {
                vec![&[]]
            } else {
                text.chunks(max).collect()
            };
            send_pieces(worker, &m, &pieces, bus::LIST_REPLY).await;
        }
        bus::KILL_REQUEST => {
            let filter = bus::decode_filter(&m.payload);
            let n = worker.clients.kill(&filter, now, None);
            worker
                .bus
                .send(
                    &worker.bus_handle,
                    m.from,
                    bus::KILL_REPLY,
                    m.request,
                    &n.to_le_bytes(),
                )
                .await;
        }
        bus::PAUSE_CHANGED => worker.pause.changed_elsewhere(),
        bus::KEY_READY => {
            let keys = bus::decode_keys(&m.payload);
            let mut engine = worker.engine.borrow_mut();
            worker
                .blocking
                .serve_announced(&mut engine, keys, m.request);
        }
        bus::ROUND_DONE => {
            if let Some(weight) = bus::payload_u64(&m.payload) {
                worker.blocking.round_done(m.request, weight);
            }
        }
        bus::WORD_READY => {
            if let Some(word) = bus::payload_u32(&m.payload) {
                let keys = worker.blocking.keys_of_word(word);
                let mut engine = worker.engine.borrow_mut();
                worker
                    .blocking
                    .serve_announced(&mut engine, keys, m.request);
            }
        }
        bus::UNBLOCK_REQUEST => {
            let id = bus::payload_u64(&m.payload);
            let error = m.payload.get(8) == Some(&1);
            let n = id.is_some_and(|id| worker.blocking.client_unblock(id, error)) as u64;
            worker
                .bus
                .send(
                    &worker.bus_handle,
                    m.from,
                    bus::UNBLOCK_REPLY,
                    m.request,
                    &n.to_le_bytes(),
                )
                .await;
        }
        bus::CHANNELS_REQUEST => {
            let shard = m.payload.first() == Some(&1);
            let pattern = m.payload.get(1..).filter(|_| m.payload.len() > 1);
            let names = worker
                .engine
                .borrow_mut()
                .pubsub()
                .channel_names(shard, pattern);
            let pieces = bus::encode_names(&names, reply_piece_max(worker));
            let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            send_pieces(worker, &m, &pieces, bus::CHANNELS_REPLY).await;
        }
        bus::GATHER_REQUEST => {
            let answer = worker.engine.borrow_mut().answer_gather(&m.payload);
            let max = reply_piece_max(worker);
            let pieces: Vec<&[u8]> = if answer.is_empty() {
                vec![&[]]
            } else {
                answer.chunks(max).collect()
            };
            send_pieces(worker, &m, &pieces, bus::GATHER_REPLY).await;
        }
        bus::LIST_PART => worker
            .bus
            .reply_arrived(m.request, m.from, m.payload, false),
        bus::LIST_REPLY
        | bus::KILL_REPLY
        | bus::UNBLOCK_REPLY
        | bus::CHANNELS_REPLY
        | bus::GATHER_REPLY => worker.bus.reply_arrived(m.request, m.from, m.payload, true),
        _ => {}
    }
}

/// The largest piece of a reply sent back through a mailbox.
fn reply_piece_max(worker: &Worker) -> usize {
    worker
        .bus_handle
        .borrow()
        .mailbox_max_payload()
        .min(32 << 10)
}

/// Answers request `m` in pieces: LIST_PART for all but the last, which
/// goes as `last_kind`.
async fn send_pieces(worker: &Worker, m: &Message, pieces: &[&[u8]], last_kind: u32) {
    let last = pieces.len().saturating_sub(1);
    for (i, piece) in pieces.iter().enumerate() {
        let kind = if i == last { last_kind } else { bus::LIST_PART };
        worker
            .bus
            .send(&worker.bus_handle, m.from, kind, m.request, piece)
            .await;
    }
}
