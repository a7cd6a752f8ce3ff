//! The supervisor's control socket (`<segment>.ctl`, a Unix stream socket).
//! Two kinds of peer connect to it:
//!
//! - `shoal ctl`, which sends RESP requests (`STATUS`, `SCALE n`,
//!   `UPGRADE [binary]`, `EXEC at_ms spin|naive cmd …`, `SHUTDOWN`) and gets
//!   one RESP reply each: an error, `+OK`, or a bulk string of JSON;
//! - each worker, at start, which sends a JSON hello line and from then on
//!   is a [`Channel`]: the supervisor sends it its listening sockets (again
//!   when another worker's CONFIG SET port / bind moved them), `exec`
//!   requests and handed-over connections.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use proto::resp::RequestParser;
use rustix::net::RecvFlags;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::{UnixListener, UnixStream};

use crate::channel::Channel;
use crate::error::{io, Error};
use crate::simultaneous::monotonic_ns;
use crate::supervisor::listener::{Kind, ListenerSet};
use crate::supervisor::Supervisor;

/// Most bytes of one ctl request.
const MAX_REQUEST: usize = 64 << 10;
/// Most bytes of a command's reply that `ctl exec` shows.
const EXEC_REPLY_MAX: usize = 200;
/// The furthest ahead `ctl exec --at` may aim.
const EXEC_AT_MAX_MS: u64 = 60_000;

/// Binds the control socket at `path`, replacing a stale file (the caller
/// has checked that no live supervisor owns the segment).
pub(crate) fn bind(path: &Path) -> Result<std::os::unix::net::UnixListener, Error> {
    crate::supervisor::listener::unix(path)
}

/// Accepts control connections until the supervisor stops.
pub(crate) async fn accept(sup: Rc<Supervisor>, listener: UnixListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::task::spawn_local(connection(sup.clone(), stream));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Serves one control connection: a worker's channel when its first byte
/// opens a JSON object, RESP requests otherwise.
async fn connection(sup: Rc<Supervisor>, stream: UnixStream) {
    let mut first = [0u8; 1];
    let peeked = loop {
        if stream.readable().await.is_err() {
            return;
        }
        let peek = stream.try_io(Interest::READABLE, || {
            rustix::net::recv(&stream, &mut first[..], RecvFlags::PEEK)
                .map_err(std::io::Error::from)
        });
        match peek {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            other => break other,
        }
    };
    let is_worker = match peeked {
        Ok((1, _)) => first[0] == b'{',
        _ => return,
    };
    if is_worker {
        worker_channel(sup, Rc::new(Channel::new(stream))).await;
    } else {
        let _ = ctl_requests(&sup, stream).await;
    }
}

/// A worker's channel: its hello, then its sockets, then its replies.
async fn worker_channel(sup: Rc<Supervisor>, channel: Rc<Channel>) {
    let Ok(Some((hello, fds))) = channel.recv().await else {
        return;
    };
    let slot = hello["hello"].as_u64().unwrap_or(u64::MAX);
    let pid = hello["pid"].as_u64().unwrap_or(0);
    if hello["resume"] == true {
        // A worker of the previous image of this supervisor, giving its
        // sockets back.
        let known = sup
            .slots
            .borrow()
            .get(&(slot as u32))
            .is_some_and(|s| s.pid.map(u64::from) == Some(pid) && s.channel.is_none());
        let kinds: Vec<Kind> = hello["kinds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().and_then(Kind::from_name))
            .collect();
        if !known || kinds.len() != fds.len() {
            return;
        }
        let set = ListenerSet {
            sockets: kinds
                .into_iter()
                .zip(fds.into_iter().map(Rc::new))
                .collect(),
        };
        sup.resumed_sockets(slot as u32, set);
        let listeners = match sup.slots.borrow_mut().get_mut(&(slot as u32)) {
            Some(s) => {
                s.channel = Some(channel.clone());
                Rc::downgrade(&s.listeners)
            }
            None => return,
        };
        return serve_worker(&sup, &channel, listeners).await;
    }
    let listeners = {
        let mut slots = sup.slots.borrow_mut();
        match slots.get_mut(&(slot as u32)) {
            // The worker this slot runs, not a stray one.
            Some(s) if s.pid.map(u64::from) == Some(pid) => {
                s.version = hello["version"].as_str().unwrap_or("").to_string();
                s.listeners.clone()
            }
            _ => return,
        }
    };
    let kinds: Vec<&str> = listeners.sockets.iter().map(|(k, _)| k.name()).collect();
    let fds: Vec<_> = listeners.sockets.iter().map(|(_, fd)| fd.as_fd()).collect();
    let msg =
        json!({"op": "listeners", "kinds": kinds, "shared": sup.balance == crate::Balance::Shared});
    if channel.send(&msg, &fds).await.is_err() {
        return;
    }
    drop(fds);
    // Not a strong reference: a slot's listeners close when the last slot
    // serving them goes, not when this task ends.
    let weak = Rc::downgrade(&listeners);
    drop(listeners);
    let listeners = weak;
    if let Some(s) = sup.slots.borrow_mut().get_mut(&(slot as u32)) {
        s.channel = Some(channel.clone());
    }
    serve_worker(&sup, &channel, listeners).await;
}

/// A worker's messages: connections it hands over, replies to `exec`.
async fn serve_worker(
    sup: &Supervisor,
    channel: &Channel,
    mut listeners: std::rc::Weak<ListenerSet>,
) {
    while let Ok(Some((msg, mut fds))) = channel.recv().await {
        if msg["op"] == "replica" {
            if let Some(fd) = fds.pop() {
                crate::supervisor::replication::serve_replica(fd, &msg["link"]);
            }
            continue;
        }
        if msg["op"] == "rebound" {
            let kinds: Vec<Kind> = msg["kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().and_then(Kind::from_name))
                .collect();
            if kinds.len() == fds.len() {
                let sockets = kinds.into_iter().zip(fds).collect();
                sup.listeners_moved(channel, listeners.as_ptr(), &msg, sockets)
                    .await;
                // This worker's slot serves the new set now.
                let slots = sup.slots.borrow();
                let mine = slots.values().find(|s| {
                    s.channel
                        .as_ref()
                        .is_some_and(|c| std::ptr::eq(Rc::as_ptr(c), channel))
                });
                if let Some(s) = mine {
                    listeners = Rc::downgrade(&s.listeners);
                }
            }
            // The worker that ran CONFIG SET holds its reply until now.
            let done = json!({"op": "rebound-done", "rebind": msg["rebind"]});
            let _ = channel.send(&done, &[]).await;
            continue;
        }
        if msg["op"] == "handover" {
            if let Some(fd) = fds.pop() {
                let kind = msg["kind"].as_str().unwrap_or("redis");
                let adopt = json!({"op": "adopt", "kind": kind, "state": msg["state"]});
                pass_on(sup, listeners.as_ptr(), &adopt, fd).await;
            }
            continue;
        }
        let id = msg["id"].as_u64().unwrap_or(0);
        if let Some(reply) = sup.pending.borrow_mut().remove(&id) {
            let _ = reply.send(msg);
        }
    }
}

/// Sends a connection to a worker that stays: one serving the same
/// listeners (the replacement in an upgrade) when there is one, else any.
/// With none left (the server stops) the connection closes.
async fn pass_on(sup: &Supervisor, listeners: *const ListenerSet, msg: &Value, fd: OwnedFd) {
    let channel = {
        let slots = sup.slots.borrow();
        let staying = || {
            slots
                .values()
                .filter(|s| !s.retiring && !s.ended && s.channel.is_some())
        };
        staying()
            .find(|s| std::ptr::eq(Rc::as_ptr(&s.listeners), listeners))
            .or_else(|| staying().next())
            .and_then(|s| s.channel.clone())
    };
    if let Some(channel) = channel {
        let _ = channel.send(msg, &[fd.as_fd()]).await;
    }
}

/// Answers RESP requests until the peer closes.
async fn ctl_requests(sup: &Rc<Supervisor>, mut stream: UnixStream) -> std::io::Result<()> {
    let mut parser = RequestParser::new();
    let mut buf = Vec::new();
    loop {
        let parsed = parser
            .parse(&buf)
            .map(|r| r.map(|(args, n)| (args.iter().map(|a| a.to_vec()).collect::<Vec<_>>(), n)));
        match parsed {
            Ok(Some((args, consumed))) => {
                buf.drain(..consumed);
                let reply = match request(sup, &args).await {
                    Ok(Reply::Ok) => b"+OK\r\n".to_vec(),
                    Ok(Reply::Json(v)) => {
                        let text = v.to_string();
                        format!("${}\r\n{text}\r\n", text.len()).into_bytes()
                    }
                    Err(e) => format!("-ERR {}\r\n", e.to_string().replace(['\r', '\n'], " "))
                        .into_bytes(),
                };
                stream.write_all(&reply).await?;
            }
            Ok(None) => {
                if buf.len() > MAX_REQUEST {
                    return Ok(());
                }
                let mut chunk = [0u8; 4096];
                let n = stream.read(&mut chunk).await?;
                if n == 0 {
                    return Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) => {
                stream
                    .write_all(format!("-ERR Protocol error: {e}\r\n").as_bytes())
                    .await?;
                return Ok(());
            }
        }
    }
}

enum Reply {
    Ok,
    Json(Value),
}

async fn request(sup: &Rc<Supervisor>, args: &[Vec<u8>]) -> Result<Reply, Error> {
    let text = |i: usize| String::from_utf8_lossy(&args[i]).into_owned();
    let Some(name) = args.first() else {
        return Err(Error::Config("empty request".into()));
    };
    let wrong = || {
        Error::Config(format!(
            "wrong number of arguments for '{}'",
            String::from_utf8_lossy(name).to_lowercase()
        ))
    };
    match name.to_ascii_uppercase().as_slice() {
        b"STATUS" => Ok(Reply::Json(status(sup))),
        b"SCALE" => {
            if args.len() != 2 {
                return Err(wrong());
            }
            let n: u32 = text(1)
                .parse()
                .map_err(|_| Error::Config(format!("not a number of workers: {:?}", text(1))))?;
            let from = sup.scale(n).await?;
            Ok(Reply::Json(json!({"from": from, "to": sup.wanted()})))
        }
        b"UPGRADE" => {
            let binary = match args.len() {
                1 => sup.exe.borrow().clone(),
                2 => PathBuf::from(text(1)),
                _ => return Err(wrong()),
            };
            let replaced = sup.upgrade(binary.clone()).await?;
            Ok(Reply::Json(
                json!({"binary": binary.display().to_string(), "replaced": replaced}),
            ))
        }
        b"EXEC" => {
            if args.len() < 4 {
                return Err(wrong());
            }
            let at_ms: u64 = text(1)
                .trim_start_matches('+')
                .parse()
                .ok()
                .filter(|ms| *ms <= EXEC_AT_MAX_MS)
                .ok_or_else(|| {
                    Error::Config(format!(
                        "--at takes 0 to {EXEC_AT_MAX_MS} ms, not {:?}",
                        text(1)
                    ))
                })?;
            let spin = match text(2).as_str() {
                "spin" => true,
                "naive" => false,
                other => {
                    return Err(Error::Config(format!(
                        "exec mode is spin or naive, not {other:?}"
                    )))
                }
            };
            Ok(Reply::Json(exec(sup, at_ms, spin, &args[3..]).await?))
        }
        b"REEXEC" => {
            let binary = match args.len() {
                1 => std::env::current_exe().map_err(io("find the shoal executable"))?,
                2 => PathBuf::from(text(1)),
                _ => return Err(wrong()),
            };
            if !binary.is_file() {
                return Err(Error::Config(format!("{} is not a file", binary.display())));
            }
            // No scale or upgrade half done: the new image takes over whole
            // slots. The guard is released by the exec itself.
            std::mem::forget(sup.changing.lock().await);
            let workers = sup.wanted();
            *sup.reexec.borrow_mut() = Some(binary.clone());
            sup.stop.notify_one();
            Ok(Reply::Json(json!({
                "pid": std::process::id(),
                "binary": binary.display().to_string(),
                "workers": workers,
            })))
        }
        b"SHUTDOWN" => {
            sup.stopping.set(true);
            sup.stop.notify_one();
            Ok(Reply::Ok)
        }
        other => Err(Error::Config(format!(
            "unknown command '{}' (STATUS, SCALE, UPGRADE, REEXEC, EXEC, SHUTDOWN)",
            String::from_utf8_lossy(other)
        ))),
    }
}

/// `ctl status`: the supervisor, every worker, the store's memory, the log.
fn status(sup: &Supervisor) -> Value {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let rates = sup.rates.borrow();
    let slots = sup.slots.borrow();
    let workers: Vec<Value> = sup
        .store
        .workers()
        .unwrap_or_default()
        .into_iter()
        .map(|w| {
            let slot = slots.get(&w.slot);
            json!({
                "slot": w.slot,
                "pid": w.pid,
                "version": slot.map(|s| s.version.as_str()).unwrap_or(""),
                "binary": slot.map(|s| s.binary.display().to_string()).unwrap_or_default(),
                "state": w.state.name(),
                "uptime_s": now_ms.saturating_sub(w.started_ms) as f64 / 1e3,
                "connections": w.connections,
                "total_connections": w.total_connections,
                "commands": w.commands,
                "commands_per_sec": rates.get(&w.pid).copied().unwrap_or(0.0),
                "restarts": w.restarts,
            })
        })
        .collect();
    let memory = match sup.store.info() {
        Ok(info) => json!({
            "segment_bytes": info.segment_bytes,
            "used_bytes": info.arena.used_bytes,
            "keys": info.keyspace.iter().map(|(keys, _)| keys).sum::<u64>(),
        }),
        Err(_) => json!({}),
    };
    let log = sup.store.log_ring().status();
    let log = if log.enabled {
        json!({
            "enabled": true,
            "policy": log.policy.to_string(),
            "head_lsn": log.head,
            "written_lsn": log.released,
            "fsynced_lsn": log.fsynced,
            "snapshot_start_lsn": log.snapshot_start_lsn,
        })
    } else {
        json!({"enabled": false})
    };
    json!({
        "supervisor": {
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "binary": std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            // What new workers run (the last `ctl upgrade`'s binary).
            "worker_binary": sup.exe.borrow().display().to_string(),
            "uptime_s": sup.started.elapsed().as_secs_f64(),
            "balance": sup.balance.name(),
            "workers_wanted": sup.wanted(),
            // Workers a re-executed supervisor still waits to hear from.
            "reconnecting": slots.values().filter(|s| !s.ended && s.channel.is_none()).count(),
        },
        "workers": workers,
        "memory": memory,
        "log": log,
        "replication": crate::supervisor::replication::ctl_status(),
    })
}

/// `ctl exec`: sends `argv` to every serving worker to run at one instant
/// (`spin`: now + `at_ms` on CLOCK_MONOTONIC, each worker spins to it) or
/// on arrival (naive); reports each start and the spread.
async fn exec(sup: &Supervisor, at_ms: u64, spin: bool, argv: &[Vec<u8>]) -> Result<Value, Error> {
    let serving: Vec<u32> = sup
        .store
        .workers()
        .unwrap_or_default()
        .into_iter()
        .filter(|w| w.state == store::WorkerState::Serving)
        .map(|w| w.pid)
        .collect();
    let targets: Vec<(u32, Option<u32>, Rc<Channel>)> = sup
        .slots
        .borrow()
        .iter()
        .filter(|(_, s)| !s.retiring && s.pid.is_some_and(|p| serving.contains(&p)))
        .filter_map(|(n, s)| Some((*n, s.pid, s.channel.clone()?)))
        .collect();
    if targets.is_empty() {
        return Err(Error::Config("no worker is serving".into()));
    }
    let argv: Vec<String> = argv
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let target = if spin {
        monotonic_ns() + at_ms * 1_000_000
    } else {
        0
    };
    // Spinners get a CPU each while there are CPUs enough.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut waits = Vec::new();
    let sent = monotonic_ns();
    for (i, (slot, pid, channel)) in targets.iter().enumerate() {
        let id = sup.next_request.get();
        sup.next_request.set(id + 1);
        let (tx, rx) = tokio::sync::oneshot::channel();
        sup.pending.borrow_mut().insert(id, tx);
        let mut msg = json!({"op": "exec", "id": id, "target_ns": target, "argv": argv});
        if spin && targets.len() <= cpus {
            msg["cpu"] = (i % cpus).into();
        }
        if channel.send(&msg, &[]).await.is_ok() {
            waits.push((*slot, *pid, id, rx));
        } else {
            sup.pending.borrow_mut().remove(&id);
        }
    }
    let base = if spin { target } else { sent };
    let mut workers = Vec::new();
    let mut starts = Vec::new();
    let limit = Duration::from_millis(at_ms) + Duration::from_secs(30);
    for (slot, pid, id, rx) in waits {
        let reply = tokio::time::timeout(limit, rx).await;
        sup.pending.borrow_mut().remove(&id);
        let Ok(Ok(reply)) = reply else {
            workers.push(json!({"slot": slot, "pid": pid, "error": "no reply"}));
            continue;
        };
        let start = reply["start_ns"].as_u64().unwrap_or(0);
        starts.push(start);
        let mut text = reply["reply"].as_str().unwrap_or("").to_string();
        if text.len() > EXEC_REPLY_MAX {
            let cut = (0..=EXEC_REPLY_MAX)
                .rev()
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            text.truncate(cut);
        }
        workers.push(json!({
            "slot": slot,
            "pid": pid,
            "start_offset_us": (start as f64 - base as f64) / 1e3,
            "reply": text,
        }));
    }
    let skew = match (starts.iter().max(), starts.iter().min()) {
        (Some(max), Some(min)) => (max - min) as f64 / 1e3,
        _ => 0.0,
    };
    Ok(json!({
        "mode": if spin { "spin" } else { "naive" },
        "at_ms": at_ms,
        "workers": workers,
        "max_skew_us": skew,
    }))
}

/// Before a removed worker's own listeners close: accepts what is still
/// queued on them and hands each connection to a serving worker, so closing
/// resets no one.
pub(crate) async fn hand_over_queued(sup: &Supervisor, set: Rc<ListenerSet>) {
    for (kind, fd) in set.tcp() {
        let Ok(listener) = fd.try_clone().map(std::net::TcpListener::from) else {
            continue;
        };
        let _ = listener.set_nonblocking(true);
        while let Ok((stream, _)) = listener.accept() {
            let msg = json!({"op": "adopt", "kind": kind.name()});
            pass_on(sup, Rc::as_ptr(&set), &msg, OwnedFd::from(stream)).await;
        }
    }
}
