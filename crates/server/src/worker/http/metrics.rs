//! `/metrics`: the Prometheus text exposition format (version 0.0.4) of
//! what the segment knows: per-worker connections, commands, restarts and
//! blocked clients (a `worker` label per live worker, whichever worker
//! answers), keys and memory of the store, and the store's counters.

use std::fmt::Write as _;

use store::Store;

/// The exposition format's Content-Type.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A per-worker family: name, type, help and the value of one worker.
type PerWorker = (
    &'static str,
    &'static str,
    &'static str,
    fn(&store::WorkerInfo) -> u64,
);

/// Appends one metric family's HELP and TYPE lines.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The whole exposition. A store that cannot be read leaves its families
/// out; `shoal_up` says the answering worker is alive.
pub(crate) fn render(store: &Store, answering_worker: u32) -> String {
    let mut out = String::with_capacity(4096);
    family(
        &mut out,
        "shoal_up",
        "gauge",
        "1: the worker answering is serving.",
    );
    let _ = writeln!(out, "shoal_up{{worker=\"{answering_worker}\"}} 1");
    if let Ok(workers) = store.workers() {
        let per_worker: [PerWorker; 5] = [
            (
                "shoal_connections",
                "gauge",
                "Client connections open now (RESP, memcached, HTTP, WebSocket, NATS).",
                |w| w.connections,
            ),
            (
                "shoal_connections_total",
                "counter",
                "Client connections accepted.",
                |w| w.total_connections,
            ),
            (
                "shoal_commands_total",
                "counter",
                "Commands executed.",
                |w| w.commands,
            ),
            (
                "shoal_blocked_clients",
                "gauge",
                "Clients waiting in a blocking command.",
                |w| w.blocked,
            ),
            (
                "shoal_worker_restarts_total",
                "counter",
                "Times the worker's slot was started again after it died.",
                |w| w.restarts,
            ),
        ];
        for (name, kind, help, value) in per_worker {
            family(&mut out, name, kind, help);
            for w in &workers {
                let _ = writeln!(out, "{name}{{worker=\"{}\"}} {}", w.slot, value(w));
            }
        }
        family(
            &mut out,
            "shoal_worker_start_time_seconds",
            "gauge",
            "When the worker registered, seconds since the epoch.",
        );
        for w in &workers {
            let _ = writeln!(
                out,
                "shoal_worker_start_time_seconds{{worker=\"{}\",pid=\"{}\"}} {}.{:03}",
                w.slot,
                w.pid,
                w.started_ms / 1000,
                w.started_ms % 1000
            );
        }
        family(&mut out, "shoal_workers", "gauge", "Live worker processes.");
        let _ = writeln!(out, "shoal_workers {}", workers.len());
    }
    if let Ok(info) = store.info() {
        family(&mut out, "shoal_keys", "gauge", "Keys per database.");
        for (db, (keys, _)) in info.keyspace.iter().enumerate() {
            if *keys > 0 || db == 0 {
                let _ = writeln!(out, "shoal_keys{{db=\"{db}\"}} {keys}");
            }
        }
        family(
            &mut out,
            "shoal_expiring_keys",
            "gauge",
            "Keys with a time to live per database.",
        );
        for (db, (keys, expires)) in info.keyspace.iter().enumerate() {
            if *keys > 0 || db == 0 {
                let _ = writeln!(out, "shoal_expiring_keys{{db=\"{db}\"}} {expires}");
            }
        }
        let overhead = info.segment_bytes.saturating_sub(info.arena.total_bytes);
        let memory: [(&str, &str, u64); 6] = [
            (
                "shoal_memory_used_bytes",
                "Bytes in use: the segment's fixed structures plus the values (INFO used_memory).",
                overhead + info.arena.used_bytes,
            ),
            (
                "shoal_memory_dataset_bytes",
                "Bytes of values and index overflow nodes in the arena.",
                info.arena.used_bytes,
            ),
            (
                "shoal_memory_free_bytes",
                "Free bytes in the arena.",
                info.arena.free_bytes,
            ),
            (
                "shoal_memory_arena_bytes",
                "Bytes of the arena that holds the values.",
                info.arena.total_bytes,
            ),
            (
                "shoal_memory_segment_bytes",
                "Bytes of the shared-memory segment.",
                info.segment_bytes,
            ),
            (
                "shoal_memory_max_bytes",
                "maxmemory (0: the whole arena).",
                info.maxmemory,
            ),
        ];
        for (name, help, value) in memory {
            family(&mut out, name, "gauge", help);
            let _ = writeln!(out, "{name} {value}");
        }
        family(
            &mut out,
            "shoal_store_contexts",
            "gauge",
            "Store contexts attached (one per worker thread and embedded user).",
        );
        let _ = writeln!(out, "shoal_store_contexts {}", info.contexts_attached);
        for (name, value) in &info.stats {
            let metric = format!("shoal_{}_total", sanitize(name));
            family(
                &mut out,
                &metric,
                "counter",
                &format!("The store's {name} counter (INFO stats)."),
            );
            let _ = writeln!(out, "{metric} {value}");
        }
    }
    out
}

/// A metric name part: `[a-z0-9_]` only.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}
