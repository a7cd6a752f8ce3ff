//! Byte offsets of everything in the segment. docs/design.md draws the picture;
//! this file is the single source of the numbers.

/// "SHOALSEG": the first eight bytes of every segment.
pub(crate) const MAGIC: [u8; 8] = *b"SHOALSEG";
/// Bumped whenever any offset or record format below changes.
pub const LAYOUT_VERSION: u32 = 12;

/// Number of Redis-style logical databases.
pub const NUM_DBS: usize = 16;

/// Bytes before the context table: geometry, shared counters, allocator state.
pub(crate) const HEADER_SIZE: u64 = 16 * 1024;

// --- header: geometry, written once by the creator (I2) ---
pub(crate) const H_MAGIC: u64 = 0;
pub(crate) const H_VERSION: u64 = 8;
pub(crate) const H_HEADER_SIZE: u64 = 12;
pub(crate) const H_SEG_SIZE: u64 = 16;
pub(crate) const H_CTX_OFF: u64 = 24;
pub(crate) const H_CTX_COUNT: u64 = 32;
pub(crate) const H_CTX_SIZE: u64 = 36;
pub(crate) const H_INDEX_OFF: u64 = 40;
pub(crate) const H_BUCKETS: u64 = 48;
pub(crate) const H_ARENA_OFF: u64 = 56;
pub(crate) const H_ARENA_SIZE: u64 = 64;
pub(crate) const H_CREATOR_PID: u64 = 72;
pub(crate) const H_CREATOR_UID: u64 = 76;
pub(crate) const H_CREATED_MS: u64 = 80;
pub(crate) const H_PAGE_SIZE: u64 = 88;
pub(crate) const H_MBOX_OFF: u64 = 96;
pub(crate) const H_MBOX_SIZE: u64 = 104;
pub(crate) const H_PS_OFF: u64 = 112;
pub(crate) const H_PS_SIZE: u64 = 120;
pub(crate) const H_PS_CAP: u64 = 128;
/// The transaction log ring (log/ring.rs): offset and size in bytes.
pub(crate) const H_LOG_OFF: u64 = 136;
pub(crate) const H_LOG_SIZE: u64 = 144;
/// The ACL user table area (ipc/users.rs): offset and size in bytes.
pub(crate) const H_USERS_OFF: u64 = 152;
pub(crate) const H_USERS_SIZE: u64 = 160;

// --- header: shared mutable words ---
/// The allocator lock (owner word + seq word, like every lock).
pub(crate) const H_ALLOC_LOCK: u64 = 256;
/// The admin lock: guards the retired per-db counters. A leaf lock.
pub(crate) const H_ADMIN_LOCK: u64 = 264;
pub(crate) const H_POLICY: u64 = 272;
pub(crate) const H_SAMPLES: u64 = 276;
pub(crate) const H_MAXMEMORY: u64 = 280;
/// Next bucket the active expiry sweeper visits (own cache line).
pub(crate) const H_SWEEP_CURSOR: u64 = 320;
/// Stats folded in from contexts that detached or died.
pub(crate) const H_RETIRED_STATS: u64 = 384;
/// Keys per db folded in from retired contexts (i64 × NUM_DBS).
pub(crate) const H_DB_KEYS_BASE: u64 = 1024;
/// Keys with an expiry per db folded in from retired contexts.
pub(crate) const H_DB_EXPIRES_BASE: u64 = H_DB_KEYS_BASE + 8 * NUM_DBS as u64;
/// SWAPDB's logical -> physical db map (I11): a lock word pair (owner, seq)
/// whose seq word is the map's generation, on its own cache line.
pub(crate) const H_DB_MAP_LOCK: u64 = 1280;
/// The map word: nibble `d` is `physical(d) ^ d`, so the zeroed header of a
/// new segment is the identity map.
pub(crate) const H_DB_MAP: u64 = H_DB_MAP_LOCK + 8;
/// One past the highest context slot ever claimed (slots are claimed lowest
/// first, context.rs): an exclusive section looks for lock holders only
/// below it instead of in every slot (I13).
pub(crate) const H_CTX_HIGH: u64 = H_DB_MAP_LOCK + 16;
const _: () = assert!(H_DB_EXPIRES_BASE + 8 * NUM_DBS as u64 <= H_DB_MAP_LOCK);
const _: () = assert!(H_CTX_HIGH + 8 <= 1344 && 1344 <= A_USED_BYTES);
/// Redis's default `lfu-log-factor` (what a new segment's header holds).
pub const DEFAULT_LFU_LOG_FACTOR: u32 = 10;
/// Redis's default `lfu-decay-time`, in minutes.
pub const DEFAULT_LFU_DECAY_TIME: u32 = 1;
/// Redis's `lfu-log-factor` (u32), past the db map's cache line.
pub(crate) const H_LFU_LOG_FACTOR: u64 = 1344;
/// Redis's `lfu-decay-time` in minutes (u32).
pub(crate) const H_LFU_DECAY_TIME: u64 = 1352;
/// The segment's write counter: every write that publishes or changes an
/// entry takes the next value (fetch-add) and stamps it in the entry's LSN
/// word, so a key's version is unique across the segment (WATCH). Its own
/// cache line: every writer of every process bumps it.
pub(crate) const H_WRITE_VERSION: u64 = 1408;
/// While the log is on, the lock (owner word, u32) under which a write
/// records its claim in its context and then moves the head: a process
/// killed at any instruction leaves either no claim and the head unmoved, or
/// a claim its recovery voids (log/ring.rs). Beside the head: every logged
/// write touches both.
pub(crate) const H_LOG_RESERVE_LOCK: u64 = H_WRITE_VERSION + 8;
/// The flush epoch: bumped by FLUSHDB, FLUSHALL and SWAPDB, which change many
/// keys without stamping each (WATCH compares it as a whole).
pub(crate) const H_FLUSH_EPOCH: u64 = 1472;
const _: () = assert!(H_LFU_DECAY_TIME + 8 <= H_WRITE_VERSION);

// --- header: the transaction log (log/ring.rs) ---
// While the log is on, the write counter above is the log's head: a write
// reserves its frames by moving it past their size under the reserve lock,
// and the old value is its LSN (and the entry's version).
/// 1 while writes append records to the ring (persistence on).
pub(crate) const H_LOG_ENABLED: u64 = 1536;
/// The fsync policy workers follow for replies (0 always, 1 everysec, 2 no).
pub(crate) const H_LOG_POLICY: u64 = 1544;
/// The pid of the process that writes the log files (set with
/// `H_LOG_ENABLED`): a write waiting for ring space gives up once it is gone.
pub(crate) const H_LOG_WRITER_PID: u64 = 1552;
/// Everything before this LSN is in the log files: its ring space is free.
pub(crate) const H_LOG_RELEASED: u64 = 1600;
/// Futex word bumped whenever `H_LOG_RELEASED` moves (producers waiting for
/// space sleep on it).
pub(crate) const H_LOG_SPACE_FUTEX: u64 = 1608;
/// Everything before this LSN is fsynced.
pub(crate) const H_LOG_FSYNCED: u64 = 1664;
/// Futex word bumped whenever `H_LOG_FSYNCED` moves.
pub(crate) const H_LOG_FSYNC_FUTEX: u64 = 1672;
/// Futex word: non-zero while the log writer sleeps waiting for frames.
pub(crate) const H_LOG_WRITER_SLEEPING: u64 = 1728;
/// Snapshot requests made (SAVE, BGSAVE, ctl) and requests answered.
pub(crate) const H_SNAP_REQUESTS: u64 = 1792;
pub(crate) const H_SNAP_ANSWERED: u64 = 1800;
/// Futex word bumped when `H_SNAP_ANSWERED` or `H_SNAP_REQUESTS` moves.
pub(crate) const H_SNAP_FUTEX: u64 = 1808;
/// Start time (ms) of the snapshot being written, 0 when none.
pub(crate) const H_SNAP_RUNNING_SINCE: u64 = 1816;
/// Last snapshot: finish time (ms), 0 = ok / 1 = failed, its start LSN,
/// how long it took (ms).
pub(crate) const H_SNAP_LAST_MS: u64 = 1824;
pub(crate) const H_SNAP_LAST_FAILED: u64 = 1832;
pub(crate) const H_SNAP_START_LSN: u64 = 1840;
pub(crate) const H_SNAP_LAST_TOOK_MS: u64 = 1848;
/// 1 while the log writer's last write failed (INFO aof_last_write_status).
pub(crate) const H_LOG_WRITE_FAILED: u64 = 1856;
/// A flush whose record is logged but whose keys a dead context had not all
/// removed: its cutoff + 1 and db + 1 (0 = every db). The next handle
/// finishes it (log/ring.rs).
pub(crate) const H_FLUSH_REDO: u64 = 1872;
pub(crate) const H_FLUSH_REDO_DB: u64 = 1880;
const _: () = assert!(H_FLUSH_EPOCH + 64 <= H_LOG_ENABLED);
const _: () = assert!(H_LOG_WRITER_PID + 8 <= H_LOG_RELEASED);
const _: () = assert!(H_FLUSH_REDO_DB + 8 <= A_USED_BYTES);

// --- header: allocator state (alloc.rs), every word written through the undo log ---
pub(crate) const A_USED_BYTES: u64 = 2048;
// 2056: unused (free bytes are derived from used bytes).
pub(crate) const A_USED_BLOCKS: u64 = 2064;
pub(crate) const A_FREE_BLOCKS: u64 = 2072;
pub(crate) const A_FL_BITMAP: u64 = 2080;
pub(crate) const A_SL_BITMAPS: u64 = 2088;
pub(crate) const FL_COUNT: u64 = 44;
pub(crate) const SL_BITS: u64 = 4;
pub(crate) const SL_COUNT: u64 = 1 << SL_BITS;
pub(crate) const A_HEADS: u64 = A_SL_BITMAPS + 8 * FL_COUNT;
const A_END: u64 = A_HEADS + 8 * FL_COUNT * SL_COUNT;
const _: () = assert!(A_END <= HEADER_SIZE);
const _: () = assert!(H_DB_EXPIRES_BASE + 8 * NUM_DBS as u64 <= A_USED_BYTES);

// --- header: server plumbing (workers.rs) ---
/// Next CLIENT ID, shared by every worker so ids are unique server-wide.
pub(crate) const H_NEXT_CLIENT_ID: u64 = 8192;
/// The supervisor's pid (0 = none), so that a worker can signal it.
pub(crate) const H_SUPERVISOR_PID: u64 = 8200;
/// Worker slots with channel, pattern or key subscriptions (bit per slot,
/// pubsub.rs): a publisher looks only at these slots' tables.
pub(crate) const H_PUBSUB_SLOTS: u64 = 8256;
/// Worker slots with MONITOR clients (bit per slot).
pub(crate) const H_MONITOR_SLOTS: u64 = 8264;
/// Worker slots with key subscriptions (bit per slot): a write looks at
/// the tables only while this is non-zero.
pub(crate) const H_KEYSUB_SLOTS: u64 = 8272;
/// The next blocked client's place in the server-wide order of blocking
/// (waiters.rs): every worker takes its waiters' sequence numbers here.
pub(crate) const H_WAITER_SEQ: u64 = 8280;
/// Shared settings (CONFIG SET on one worker, seen by all): u64 words.
pub(crate) const H_CONFIG: u64 = 8448;
/// Number of shared setting words.
pub const CONFIG_WORDS: u64 = 64;
/// Shared setting text (the values CONFIG SET keeps as text): lock word pair, seqlock word,
/// length u32, then the bytes (workers.rs).
pub(crate) const H_CONFIG_TEXT: u64 = 8960;
pub(crate) const CT_LOCK: u64 = H_CONFIG_TEXT;
pub(crate) const CT_SEQ: u64 = H_CONFIG_TEXT + 8;
pub(crate) const CT_LEN: u64 = H_CONFIG_TEXT + 16;
pub(crate) const CT_BYTES: u64 = H_CONFIG_TEXT + 24;
/// Longest shared setting text.
pub const CONFIG_TEXT_MAX: u64 = 10240 - CT_BYTES;
/// The waiter table (waiters.rs, I13): one u32 per key hash, bit `s` set
/// while worker slot `s` has a client blocked on a key of that hash.
pub(crate) const H_WAITERS: u64 = 10240;
/// Words in the waiter table.
pub const WAITER_WORDS: u32 = 512;
/// The worker registry: one record per worker slot.
pub(crate) const H_WORKERS: u64 = 12288;
pub(crate) const WORKER_REC: u64 = 128;
/// Worker slots a segment has (each with a registry record and a mailbox).
pub const MAX_WORKERS: u32 = 32;
pub(crate) const W_STATE: u64 = 0;
pub(crate) const W_PID: u64 = 8;
pub(crate) const W_START_TIME: u64 = 16;
pub(crate) const W_STARTED_MS: u64 = 24;
pub(crate) const W_PORT: u64 = 32;
pub(crate) const W_CONNECTIONS: u64 = 40;
pub(crate) const W_TOTAL_CONNECTIONS: u64 = 48;
pub(crate) const W_COMMANDS: u64 = 56;
pub(crate) const W_RESTARTS: u64 = 64;
/// Clients blocked (BLPOP & co.) on the worker now.
pub(crate) const W_BLOCKED: u64 = 72;
/// 1 while the worker runs a command that may write, from before its
/// role and pause checks until its log record is reserved (FAILOVER's
/// write gate: `Store::set_worker_writing`).
pub(crate) const W_WRITING: u64 = 80;
/// Bytes the worker's clients hold in their query and output buffers, as
/// it last published them: `maxmemory` counts them with the arena's.
pub(crate) const W_CLIENT_MEMORY: u64 = 88;
/// Clients the worker closed for `maxmemory-clients`.
pub(crate) const W_EVICTED_CLIENTS: u64 = 96;
const _: () = assert!(A_END <= H_NEXT_CLIENT_ID);
const _: () = assert!(H_CONFIG + 8 * CONFIG_WORDS <= H_WAITERS);
const _: () = assert!(H_WAITERS + 4 * WAITER_WORDS as u64 <= H_WORKERS);
const _: () = assert!(W_EVICTED_CLIENTS + 8 <= WORKER_REC);
const _: () = assert!(H_WORKERS + WORKER_REC * MAX_WORKERS as u64 <= HEADER_SIZE);

// --- user table area (users.rs): two copies of the text, one live ---
/// Writer lock (owner word + seq word, like every lock).
pub(crate) const U_LOCK: u64 = 0;
/// Bumped once per completed write; its low bit names the live copy.
pub(crate) const U_SEQ: u64 = 16;
/// Lengths (u32) of copy 0 and copy 1.
pub(crate) const U_LEN0: u64 = 24;
pub(crate) const U_LEN1: u64 = 28;
/// The first copy's bytes; the second follows it.
pub(crate) const U_BYTES: u64 = 64;

// --- mailbox (mailbox.rs): one ring per worker slot, after the contexts ---
/// Producer lock (owner word + seq word, like every lock).
pub(crate) const M_LOCK: u64 = 0;
/// Bytes consumed so far (only the owning worker writes it).
pub(crate) const M_HEAD: u64 = 8;
/// Bytes produced so far (written under the lock, after the message).
pub(crate) const M_TAIL: u64 = 16;
/// 1 while a wake-up is owed to the consumer.
pub(crate) const M_WAKE: u64 = 24;
/// Start of the ring bytes.
pub(crate) const M_RING: u64 = 64;
/// Message header: payload length u32, kind u32, sender slot u32, pad, request id u64.
pub(crate) const MSG_HEADER: u64 = 24;

// --- subscription table (pubsub.rs): one per worker slot, after the mailboxes ---
/// Seqlock word: odd while the owner rebuilds its entries or rewrites its
/// patterns (readers retry).
pub(crate) const PS_SEQ: u64 = 0;
/// Entries in use, tombstones included (u32), then set to 1 when the table
/// overflowed (u32): publishers then send everything to that worker.
pub(crate) const PS_USED: u64 = 8;
pub(crate) const PS_OVERFLOW: u64 = 12;
/// Bytes of pattern records in use (u32), pattern records (u32).
pub(crate) const PS_PAT_BYTES: u64 = 16;
pub(crate) const PS_PAT_COUNT: u64 = 20;
/// Start of the entries: `cap` × 16 bytes {hash u64, count u32, kind u32}.
pub(crate) const PS_ENTRIES: u64 = 64;
pub(crate) const PS_ENTRY: u64 = 16;

// --- queue heads (waiters.rs): one table per worker slot, after the users ---
/// Set to 1 when the slot's table overflowed (its heads are then unknown).
pub(crate) const WQ_OVERFLOW: u64 = 0;
/// Start of the records: `cap` × 16 bytes {queue hash u64 (0 = free), seq u64}.
pub(crate) const WQ_RECORDS: u64 = 64;
pub(crate) const WQ_RECORD: u64 = 16;

// --- context record (context.rs) ---
pub(crate) const CTX_SIZE: u64 = 4096;
/// Context slots a new segment has unless told otherwise.
pub const DEFAULT_CONTEXTS: u32 = 256;
pub(crate) const C_STATE: u64 = 0;
pub(crate) const C_START_TIME: u64 = 8;
pub(crate) const C_TID: u64 = 16;
pub(crate) const C_ATTACHED_MS: u64 = 24;
pub(crate) const C_UNDO_LEN: u64 = 32;
pub(crate) const C_HELD: u64 = 64;
pub(crate) const HELD_CAP: u64 = 8;
pub(crate) const C_PENDING_NEW: u64 = 128;
pub(crate) const PENDING_NEW_CAP: u64 = 4;
pub(crate) const C_PENDING_FREE: u64 = 160;
pub(crate) const PENDING_FREE_CAP: u64 = 6;
/// Tree blocks (collections/paged.rs) this context allocated for a write it
/// has not published yet, chained through their link words: a crash frees
/// them.
pub(crate) const C_NEW_CHAIN: u64 = 208;
/// Tree blocks a published write took out of its tree, chained likewise,
/// freed right after the write.
pub(crate) const C_FREE_CHAIN: u64 = 216;
/// Roots of whole trees whose key was removed or overwritten, chained
/// likewise, freed leaf-first right after.
pub(crate) const C_DROP_CHAIN: u64 = 224;
/// Non-zero while an EXEC's group of log frames is open (its closing frame
/// is owed; log/ring.rs).
pub(crate) const C_LOG_GROUP: u64 = 40;
/// A logged FLUSHDB/FLUSHALL in progress: its cutoff plus one, and its db
/// plus one (0 = every db), so recovery can finish it.
pub(crate) const C_LOG_FLUSH: u64 = 48;
pub(crate) const C_LOG_FLUSH_DB: u64 = 56;
/// The log frames of the write in progress (log/ring.rs): their first
/// LSN plus one (0 = none) and their end, set when they are reserved and
/// cleared once they are complete.
pub(crate) const C_LOG_START: u64 = 232;
pub(crate) const C_LOG_END: u64 = 240;
/// 1 from the reservation until the write's transaction commits (cleared
/// through the undo log, so a rolled-back write reads 1 again): tells
/// recovery whether to complete the frames or void them.
pub(crate) const C_LOG_UNCOMMITTED: u64 = 248;
pub(crate) const C_DB_KEYS: u64 = 256;
pub(crate) const C_DB_EXPIRES: u64 = C_DB_KEYS + 8 * NUM_DBS as u64;
pub(crate) const C_STATS: u64 = 512;
/// Small blocks this context freed and keeps for its next allocations.
pub(crate) const C_STASH: u64 = 768;
pub(crate) const STASH_CAP: u64 = 8;
/// Roots of whole trees detached by a lazy free (UNLINK, FLUSHDB ASYNC,
/// the `lazyfree-lazy-*` settings), chained like `C_DROP_CHAIN` but freed
/// later in bounded steps (`Handle::free_lazily`); a recoverer frees what
/// a dead context left on it.
pub(crate) const C_LAZY_CHAIN: u64 = 832;
/// How many values on `C_LAZY_CHAIN` are not wholly freed yet (INFO's
/// `lazyfree_pending_objects`); written only by the owner, reset by its
/// recoverer.
pub(crate) const C_LAZY_PENDING: u64 = 840;
/// The exclusive section's journal (context.rs, I13): the newest chunk
/// block (0 = no section journal), the journal's state (`JOURNAL_*`), and
/// a chunk allocated but not linked yet (a crash frees it).
pub(crate) const C_JOURNAL: u64 = 848;
pub(crate) const C_JOURNAL_STATE: u64 = 856;
pub(crate) const C_JOURNAL_SPARE: u64 = 864;
pub(crate) const C_UNDO: u64 = 1024;
pub(crate) const UNDO_CAP: u64 = (CTX_SIZE - C_UNDO) / 16;
const _: () = assert!(C_DB_EXPIRES + 8 * NUM_DBS as u64 <= C_STATS);
const _: () = assert!(crate::segment::context::STAT_COUNT <= 32);
const _: () = assert!(H_RETIRED_STATS + 8 * 32 <= H_DB_KEYS_BASE);
const _: () = assert!(C_STATS + 8 * 32 <= C_STASH && C_STASH + 8 * STASH_CAP <= C_LAZY_CHAIN);
const _: () = assert!(C_LAZY_PENDING + 8 <= C_JOURNAL && C_JOURNAL_SPARE + 8 <= C_UNDO);
const _: () = assert!(C_PENDING_FREE + 8 * PENDING_FREE_CAP <= C_NEW_CHAIN);
const _: () = assert!(C_DROP_CHAIN + 8 <= C_LOG_START && C_LOG_UNCOMMITTED + 8 <= C_DB_KEYS);
const _: () = assert!(C_UNDO_LEN < C_LOG_GROUP && C_LOG_FLUSH_DB + 8 <= C_HELD);

// --- index bucket (index.rs): 64 bytes, one cache line ---
pub(crate) const BUCKET_SIZE: u64 = 64;
/// Lock owner word, then the bucket's seqlock word.
pub(crate) const B_LOCK: u64 = 0;
pub(crate) const B_SEQ: u64 = 4;
/// A chain node: `next` then `SLOTS` slots. In a home bucket it starts at +8;
/// an overflow node is an arena block whose payload is the same 56 bytes.
pub(crate) const B_NODE: u64 = 8;
pub(crate) const N_NEXT: u64 = 0;
pub(crate) const N_SLOTS: u64 = 8;
pub(crate) const SLOTS: u64 = 6;
pub(crate) const NODE_SIZE: u64 = N_SLOTS + 8 * SLOTS;
/// A slot is `tag << 48 | entry offset`; 0 is empty.
pub(crate) const SLOT_OFF_MASK: u64 = (1 << 48) - 1;

// --- entry block (entry.rs) ---
pub(crate) const E_KEYLEN: u64 = 8;
pub(crate) const E_KIND: u64 = 16;
pub(crate) const E_EXPIRE: u64 = 24;
pub(crate) const E_LSN: u64 = 32;
/// The LRU word: LRU seconds u32, then the LFU state u32 (lfu.rs).
pub(crate) const E_LRU: u64 = 40;
pub(crate) const E_KEY: u64 = 48;

/// Largest key or value the store holds (Redis's proto-max-bulk-len default).
pub const MAX_VALUE_LEN: u64 = 512 * 1024 * 1024;

/// Rounds `v` up to a multiple of `to` (a power of two).
pub(crate) const fn align_up(v: u64, to: u64) -> u64 {
    (v + to - 1) & !(to - 1)
}
