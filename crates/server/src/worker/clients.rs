//! The clients connected to this worker: their sessions (shared with their
//! connection tasks) and a way to close each one from outside (CLIENT KILL,
//! shutdown).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use engine::{KillFilter, Session};
use store::WorkerCounter;
use tokio::sync::Notify;

use crate::worker::pubsub::{Limit, Push, Target};
use crate::worker::Worker;

/// One connection as the worker sees it.
pub(crate) struct Client {
    pub session: Rc<RefCell<Session>>,
    pub kill: Rc<Notify>,
    /// Pub/sub frames and MONITOR lines waiting to be written.
    pub push: Rc<Push>,
}

/// Clients by id (so CLIENT LIST comes out in id order, as in Redis).
#[derive(Default)]
pub(crate) struct Clients {
    map: RefCell<BTreeMap<u64, Client>>,
}

impl Worker {
    /// Registers a connection's session: CLIENT LIST and CLIENT KILL see it
    /// and the worker's connection counters count it. Returns the shared
    /// session and the notifier that closes it from outside. Every admitted
    /// client leaves through [`Worker::release`].
    pub(crate) fn admit(&self, session: Session) -> (Rc<RefCell<Session>>, Rc<Notify>) {
        let id = session.id;
        let session = Rc::new(RefCell::new(session));
        let kill = Rc::new(Notify::new());
        self.clients.insert(
            id,
            Client {
                session: session.clone(),
                kill: kill.clone(),
                push: Rc::new(Push::default()),
            },
        );
        let _ = self
            .store
            .add_worker_counter(self.slot, WorkerCounter::Connections, 1);
        let _ = self
            .store
            .add_worker_counter(self.slot, WorkerCounter::TotalConnections, 1);
        (session, kill)
    }

    /// Whether `maxclients` clients are connected already, counting every
    /// serving worker's (Redis's limit is the server's, not a worker's).
    /// Read from the worker registry, so two workers accepting at the same
    /// instant may both admit the last client.
    pub(crate) fn at_max_clients(&self, maxclients: u64) -> bool {
        let everywhere: u64 = self
            .store
            .serving_connections()
            .map(|slots| slots.iter().map(|(_, n)| n).sum())
            .unwrap_or(0);
        everywhere.max(self.clients.len() as u64) >= maxclients
    }

    /// Unregisters the client `id` that [`Worker::admit`] registered; its
    /// subscriptions end with it.
    pub(crate) fn release(&self, id: u64) {
        if let Some(c) = self.clients.remove(id) {
            let published = c.push.published.replace(0);
            if published != 0 {
                let _ = self.store.add_worker_counter(
                    self.slot,
                    WorkerCounter::ClientMemory,
                    -(published as i64),
                );
            }
            if let Ok(mut session) = c.session.try_borrow_mut() {
                self.engine.borrow_mut().client_closed(&mut session);
            }
            self.engine.borrow_mut().client_released(id);
        }
        let _ = self
            .store
            .add_worker_counter(self.slot, WorkerCounter::Connections, -1);
    }
}

/// How far a client's buffers move before the worker publishes the change:
/// the shared total is touched only by big buffers, never per small reply.
const MEMORY_GRANULE: u64 = 16 * 1024;

impl Worker {
    /// Publishes the memory of the client whose queue is `push` into the
    /// worker's total when it moved by a granule (or fell to nothing);
    /// when it grew, clients are evicted past `maxmemory-clients`. Keys
    /// are evicted before the next command (`Engine::execute_resolved`),
    /// not here: evicting keys queues invalidations (CLIENT TRACKING) that
    /// would make the buffers grow and evict again, a feedback loop
    /// Redis avoids by evicting only before commands too.
    pub(crate) fn account_client(&self, push: &Push) {
        if push.evicted.get() {
            // Its memory left the total when it was evicted.
            return;
        }
        let now = push.memory();
        let was = push.published.get();
        if now.abs_diff(was) < MEMORY_GRANULE && (now != 0 || was == 0) {
            return;
        }
        push.published.set(now);
        let _ = self.store.add_worker_counter(
            self.slot,
            WorkerCounter::ClientMemory,
            now.wrapping_sub(was) as i64,
        );
        if now <= was {
            return;
        }
        let limit = match self.engine.try_borrow() {
            Ok(engine) => engine
                .config()
                .client_eviction_limit(self.store.maxmemory().unwrap_or(0)),
            // Inside a command: its connection accounts again after it.
            Err(_) => return,
        };
        if limit != 0 {
            self.evict_clients(limit);
        }
    }

    /// `maxmemory-clients`: while every worker's clients together hold
    /// `limit` bytes or more, closes this worker's clients with the most
    /// memory (never a CLIENT NO-EVICT one, nor the one running a command
    /// now). Each worker evicts only its own clients, so two workers over
    /// the limit at once may both evict.
    fn evict_clients(&self, limit: u64) {
        let Ok(mut total) = self.store.clients_memory() else {
            return;
        };
        if total < limit {
            return;
        }
        let map = self.clients.map.borrow();
        let mut candidates = Vec::new();
        for c in map.values() {
            let mem = c.push.published.get();
            let evictable =
                !c.push.evicted.get() && c.session.try_borrow().is_ok_and(|s| !s.no_evict);
            if evictable && mem != 0 {
                candidates.push((mem, c));
            }
        }
        candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
        for (mem, c) in candidates {
            if total < limit {
                break;
            }
            c.push.evicted.set(true);
            c.kill.notify_one();
            total = total.saturating_sub(mem);
            // Its memory leaves the total now, as Redis frees an evicted
            // client at once: the connection ends only when its task next
            // runs, and commands of other clients that run before it (key
            // eviction checks before each) must not count what it holds.
            c.push.published.set(0);
            let _ = self.store.add_worker_counter(
                self.slot,
                WorkerCounter::ClientMemory,
                -(mem as i64),
            );
            let _ = self
                .store
                .add_worker_counter(self.slot, WorkerCounter::EvictedClients, 1);
        }
    }
}

/// Whether `filter` selects the client `s`.
fn matches(filter: &KillFilter, s: &Session, now_ms: u64) -> bool {
    if filter.skip_me && s.id == filter.caller {
        return false;
    }
    filter.id.is_none_or(|id| id == s.id)
        && filter.addr.as_deref().is_none_or(|a| a == s.addr)
        && filter.laddr.as_deref().is_none_or(|a| a == s.laddr)
        && filter
            .max_age
            .is_none_or(|age| now_ms.saturating_sub(s.created_ms) / 1000 >= age)
        && filter
            .client_type
            .is_none_or(|t| t.selects(s.subs().total() > 0))
        && filter.selects_acl(s)
}

impl Clients {
    pub fn insert(&self, id: u64, client: Client) {
        self.map.borrow_mut().insert(id, client);
    }

    pub fn remove(&self, id: u64) -> Option<Client> {
        self.map.borrow_mut().remove(&id)
    }

    /// The push queue of client `id`.
    pub fn push_of(&self, id: u64) -> Option<Rc<Push>> {
        self.map.borrow().get(&id).map(|c| c.push.clone())
    }

    /// Where frames for client `id` go: its queue, the output limit of its
    /// class (`pubsub` while it has subscriptions) and its closer.
    pub fn push_target(&self, id: u64, normal: Limit, pubsub: Limit) -> Option<Target> {
        let map = self.map.borrow();
        let c = map.get(&id)?;
        // A connection running a command holds its session: it is a
        // subscriber if it gets frames at all.
        let subscribed = c
            .session
            .try_borrow()
            .map_or(true, |s| s.subs().total() > 0);
        let limit = if subscribed { pubsub } else { normal };
        Some(Target {
            push: c.push.clone(),
            limit,
            kill: c.kill.clone(),
        })
    }

    /// Every client's id and session.
    pub fn sessions(&self) -> Vec<(u64, Rc<RefCell<Session>>)> {
        let map = self.map.borrow();
        map.iter().map(|(id, c)| (*id, c.session.clone())).collect()
    }

    /// Queues reply bytes for client `id`'s connection to write next
    /// (before anything it reads later).
    pub fn queue_output(&self, id: u64, bytes: &[u8]) {
        if let Some(c) = self.map.borrow().get(&id) {
            c.push.append(bytes);
        }
    }

    /// Closes client `id`.
    pub fn close(&self, id: u64) {
        if let Some(c) = self.map.borrow().get(&id) {
            c.kill.notify_one();
        }
    }

    pub fn len(&self) -> usize {
        self.map.borrow().len()
    }

    /// Runs `f` on each client's session; `current` stands in for the caller's
    /// own session, which its connection holds borrowed while it runs.
    fn each(&self, current: Option<&Session>, mut f: impl FnMut(&Session)) {
        for (id, c) in self.map.borrow().iter() {
            match c.session.try_borrow() {
                Ok(s) => f(&s),
                Err(_) => {
                    if let Some(cur) = current.filter(|s| s.id == *id) {
                        f(cur);
                    }
                }
            }
        }
    }

    /// CLIENT LIST lines (each ending in `\n`) for the clients in `ids` (all
    /// when empty); `engine` adds what it keeps of them (tracking).
    pub fn list(
        &self,
        ids: &[u64],
        now_ms: u64,
        current: Option<&Session>,
        engine: Option<&engine::Engine>,
    ) -> String {
        let mut out = String::new();
        self.each(current, |s| {
            if ids.is_empty() || ids.contains(&s.id) {
                match engine {
                    Some(e) => out.push_str(&e.client_line(s, now_ms)),
                    None => out.push_str(&s.client_line(now_ms)),
                }
                out.push('\n');
            }
        });
        out
    }

    /// Closes every client `filter` selects; returns how many.
    pub fn kill(&self, filter: &KillFilter, now_ms: u64, current: Option<&Session>) -> u64 {
        let mut victims = Vec::new();
        self.each(current, |s| {
            if matches(filter, s, now_ms) {
                victims.push(s.id);
            }
        });
        let map = self.map.borrow();
        for id in &victims {
            if let Some(c) = map.get(id) {
                c.kill.notify_one();
            }
        }
        victims.len() as u64
    }

    /// Closes every client (shutdown).
    pub fn kill_all(&self) {
        for c in self.map.borrow().values() {
            c.kill.notify_one();
        }
    }
}
