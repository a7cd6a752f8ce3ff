//! A worker process: attaches the segment, takes its slot in the worker
//! registry, binds the shared RESP port (SO_REUSEPORT) and serves clients on
//! one tokio `current_thread` loop until SIGTERM/SIGINT, then drains: it stops
//! accepting, lets every connection finish the replies in flight, and exits.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use engine::{Config, Engine, ServerInfo};
use store::{Handle, Location, Message, OpenOptions, Store, WorkerState};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::LocalSet;

use crate::blocking::Blocking;
use crate::bus::{self, Bus};
use crate::clients::Clients;
use crate::connection;
use crate::error::{io, Error};
use crate::{http, listener, memcache, pubsub};

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
    pub shutdown: watch::Sender<bool>,
    /// Signalled when pub/sub messages wait for a full ring to drain.
    pub backlog_pending: tokio::sync::Notify,
    /// Signalled by the engine when pub/sub output appears.
    pub pubsub_output: Rc<tokio::sync::Notify>,
    /// Replies held for the log's fsync (`appendfsync always`).
    pub durable: crate::durable::Durable,
}

impl Worker {
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
        config_file: String::new(),
        run_id: run_id(),
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
        shutdown,
        backlog_pending: tokio::sync::Notify::new(),
        pubsub_output: Rc::new(tokio::sync::Notify::new()),
        durable: crate::durable::Durable::new(&store_for_durable),
    });
    let output = worker.pubsub_output.clone();
    worker
        .engine
        .borrow_mut()
        .pubsub()
        .set_on_output(Box::new(move || output.notify_one()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("start the event loop"))?;
    LocalSet::new().block_on(&rt, serve(worker, opts))
}

/// 40 hex digits for INFO's `run_id`.
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
    let cfg = &opts.config;
    let mut listeners = Vec::new();
    if cfg.port != 0 {
        let addr = listener::resolve(&cfg.bind, cfg.port)?;
        let std_listener = listener::reuseport_tcp(addr)?;
        let l = tokio::net::TcpListener::from_std(std_listener)
            .map_err(io(format!("listen on {addr}")))?;
        listeners.push(tokio::task::spawn_local(accept_tcp(worker.clone(), l)));
    }
    if cfg.memcached_port != 0 {
        let addr = listener::resolve(&cfg.bind, cfg.memcached_port)?;
        let l = tokio::net::TcpListener::from_std(listener::reuseport_tcp(addr)?)
            .map_err(io(format!("listen on {addr}")))?;
        listeners.push(tokio::task::spawn_local(memcache::accept_tcp(
            worker.clone(),
            l,
        )));
    }
    if cfg.memcached_udp_port != 0 {
        let addr = listener::resolve(&cfg.bind, cfg.memcached_udp_port)?;
        let s = tokio::net::UdpSocket::from_std(listener::reuseport_udp(addr)?)
            .map_err(io(format!("listen on udp {addr}")))?;
        listeners.push(tokio::task::spawn_local(memcache::serve_udp(
            worker.clone(),
            s,
        )));
    }
    if cfg.http_port != 0 {
        let addr = listener::resolve(&cfg.bind, cfg.http_port)?;
        let l = tokio::net::TcpListener::from_std(listener::reuseport_tcp(addr)?)
            .map_err(io(format!("listen on {addr}")))?;
        listeners.push(tokio::task::spawn_local(http::accept(worker.clone(), l)));
    }
    // A Unix socket path can be bound once: the first worker serves it.
    if !cfg.unixsocket.is_empty() && opts.slot == 0 {
        let std_listener = listener::unix(cfg.unixsocket.as_ref())?;
        let l = tokio::net::UnixListener::from_std(std_listener)
            .map_err(io(format!("listen on {}", cfg.unixsocket)))?;
        listeners.push(tokio::task::spawn_local(accept_unix(worker.clone(), l)));
    }
    let wake = worker.bus.bind()?;
    worker.bus_handle.borrow_mut().mailbox_reset(worker.slot)?;
    // A predecessor in this slot may have died with subscribers.
    worker.store.pubsub_reset(worker.slot)?;
    tokio::task::spawn_local(pubsub::flush_backlog(worker.clone()));
    tokio::task::spawn_local(pubsub::pump(worker.clone()));
    tokio::task::spawn_local(mailbox_loop(worker.clone(), wake));
    tokio::task::spawn_local(send_ready(worker.clone()));
    tokio::task::spawn_local(sweeper(worker.clone()));
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
    let _ = worker.shutdown.send(true);
    for l in listeners {
        l.abort();
    }
    worker.clients.kill_all();
    for _ in 0..500 {
        if worker.clients.len() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Every blocked client left with its connection; a straggler's bits
    // would only cost other workers needless messages.
    let _ = worker.store.clear_waiters(worker.slot);
    let _ = worker.store.pubsub_reset(worker.slot);
    worker
        .store
        .set_worker_state(worker.slot, WorkerState::Free)?;
    Ok(())
}

async fn accept_tcp(worker: Rc<Worker>, listener: tokio::net::TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let local = stream
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let fd = stream.as_raw_fd();
                tokio::task::spawn_local(connection::run(
                    worker.clone(),
                    stream,
                    (peer.to_string(), local, fd),
                ));
            }
            // Out of file descriptors and the like: back off, do not spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn accept_unix(worker: Rc<Worker>, listener: tokio::net::UnixListener) {
    let path = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
        .unwrap_or_default();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let fd = stream.as_raw_fd();
                tokio::task::spawn_local(connection::run(
                    worker.clone(),
                    stream,
                    (format!("{path}:0"), path.clone(), fd),
                ));
            }
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
        worker.flush_pubsub();
    }
}

/// Tells other workers about written keys their blocked clients wait on
/// (the outbox `Blocking::serve_ready` fills).
async fn send_ready(worker: Rc<Worker>) {
    loop {
        worker.blocking.outbox_ready.notified().await;
        let outbox = worker.blocking.take_outbox();
        let max = worker
            .bus_handle
            .borrow()
            .mailbox_max_payload()
            .min(32 << 10);
        for (slot, keys) in outbox {
            let (payloads, too_long) = bus::encode_keys(&keys, max);
            for p in payloads {
                worker
                    .bus
                    .send(&worker.bus_handle, slot, bus::KEY_READY, 0, &p)
                    .await;
            }
            for (db, key) in too_long {
                let word = store::waiter_word(*db, key);
                worker
                    .bus
                    .send(
                        &worker.bus_handle,
                        slot,
                        bus::WORD_READY,
                        0,
                        &word.to_le_bytes(),
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
            let text = worker.clients.list(&ids, now, None).into_bytes();
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
        bus::KEY_READY => {
            let keys = bus::decode_keys(&m.payload);
            let mut engine = worker.engine.borrow_mut();
            worker.blocking.serve_ready(&mut engine, keys);
        }
        bus::WORD_READY => {
            let word = m
                .payload
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes);
            if let Some(word) = word {
                let keys = worker.blocking.keys_of_word(word);
                let mut engine = worker.engine.borrow_mut();
                worker.blocking.serve_ready(&mut engine, keys);
            }
        }
        bus::UNBLOCK_REQUEST => {
            let id = m
                .payload
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes);
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
        bus::LIST_PART => worker
            .bus
            .reply_arrived(m.request, m.from, m.payload, false),
        bus::LIST_REPLY | bus::KILL_REPLY | bus::UNBLOCK_REPLY | bus::CHANNELS_REPLY => {
            worker.bus.reply_arrived(m.request, m.from, m.payload, true)
        }
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
