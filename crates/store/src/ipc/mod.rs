//! What worker processes share besides keys: the worker registry and its
//! counters, a mailbox per worker, the pub/sub subscription tables, the
//! waiter table of blocked clients, the key log (keyspace events) and the
//! ACL user table.

pub(crate) mod keylog;
pub(crate) mod mailbox;
pub(crate) mod pubsub;
pub(crate) mod users;
pub(crate) mod waiters;
pub(crate) mod workers;
