//! Settings in force for one worker, with their Redis names. CONFIG GET and
//! CONFIG SET read and change them; settings kept in the segment (memory limit,
//! eviction policy) are read from and written to the store, so every worker
//! sees a change at once.

/// The settings a worker runs with.
#[derive(Clone, Debug)]
pub struct Config {
    /// `bind`.
    pub bind: String,
    /// `port` (0 = no RESP TCP listener).
    pub port: u16,
    /// `unixsocket` (empty = none).
    pub unixsocket: String,
    /// `proto-max-bulk-len`.
    pub proto_max_bulk_len: u64,
    /// `client-query-buffer-limit`.
    pub client_query_buffer_limit: u64,
    /// `client-output-buffer-limit` for normal clients: hard limit in bytes
    /// (0 = none), soft limit, soft seconds.
    pub output_limit_normal: (u64, u64, u64),
    /// `timeout`: close idle clients after this many seconds (0 = never).
    pub timeout: u64,
    /// `maxclients`.
    pub maxclients: u64,
    /// `hz`: active expiry passes per second.
    pub hz: u64,
    /// `dir`.
    pub dir: String,
    /// Number of worker processes (`workers`).
    pub workers: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            unixsocket: String::new(),
            proto_max_bulk_len: proto::resp::DEFAULT_PROTO_MAX_BULK_LEN,
            client_query_buffer_limit: proto::resp::DEFAULT_CLIENT_QUERY_BUFFER_LIMIT as u64,
            output_limit_normal: (0, 0, 0),
            timeout: 0,
            maxclients: 10_000,
            hz: 10,
            dir: "./shoal-data".into(),
            workers: 1,
        }
    }
}
