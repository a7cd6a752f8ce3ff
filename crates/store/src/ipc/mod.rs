//! What worker processes share besides keys: the worker registry and its
//! counters, a mailbox per worker, the pub/sub subscription tables, the
//! waiter table of blocked clients and the key log (keyspace events).

pub(crate) mod keylog;
pub(crate) mod mailbox;
pub(crate) mod pubsub;
pub(crate) mod waiters;
pub(crate) mod workers;
