//! The lowest layer: the mapped segment and what lives directly on its
//! bytes. This file creates and attaches a segment (naming, size, the
//! header handshake and the validation an attacher does before trusting a
//! single offset, I2); `shm` is the only code with `unsafe` (I1), `layout`
//! names every offset, `context` gives each thread its undo log, locks and
//! recovery of dead processes, `journal` extends the undo log over a whole
//! exclusive section, and `alloc` is the allocator.

pub(crate) mod alloc;
pub(crate) mod context;
pub(crate) mod journal;
pub(crate) mod layout;
pub(crate) mod shm;

use std::fs::{File, OpenOptions as FsOpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::segment::context::RecoveryHooks;
use crate::segment::layout::*;
use crate::segment::shm::Region;

/// Where a segment lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A POSIX shared-memory name: the file `/dev/shm/NAME` (or on hugetlbfs
    /// when the system has huge pages reserved).
    Name(String),
    /// Any file path: tmpfs, a DAX mount, or a plain file for tests.
    Path(PathBuf),
}

impl Location {
    /// The file this location names now: an existing segment's file, or where
    /// a new one would go.
    pub fn file_path(&self) -> PathBuf {
        resolve(self, 0)
    }
}

/// The time source for expiry and the LRU clock; injectable for tests.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// Wall-clock milliseconds since the Unix epoch, as Redis uses for expiry.
    #[default]
    System,
    /// A clock a test moves by hand (milliseconds since the epoch).
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            Clock::Manual(ms) => ms.load(Ordering::Relaxed),
        }
    }
}

/// How to find or make a segment.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Name or path of the segment.
    pub location: Location,
    /// Size in bytes when the segment is created (ignored when attaching).
    pub size: u64,
    /// Create the segment when it does not exist.
    pub create: bool,
    /// Context slots (attached threads) when the segment is created.
    pub contexts: u32,
    /// Time source.
    pub clock: Clock,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            location: Location::Name("shoal".into()),
            size: 1 << 30,
            create: true,
            contexts: DEFAULT_CONTEXTS,
            clock: Clock::System,
        }
    }
}

/// Parses a size such as `64m`, `1g`, `512k` or `1048576`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim().to_ascii_lowercase();
    let (digits, mult) = match s.trim_end_matches('b').chars().last()? {
        'k' => (&s[..s.trim_end_matches('b').len() - 1], 1u64 << 10),
        'm' => (&s[..s.trim_end_matches('b').len() - 1], 1 << 20),
        'g' => (&s[..s.trim_end_matches('b').len() - 1], 1 << 30),
        't' => (&s[..s.trim_end_matches('b').len() - 1], 1 << 40),
        _ => (s.as_str(), 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// The geometry an attacher validated, kept in process memory so that nothing
/// another process writes later can move an offset under us (I2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub seg_size: u64,
    pub ctx_off: u64,
    pub ctx_count: u32,
    pub index_off: u64,
    pub buckets: u64,
    pub arena_off: u64,
    pub arena_size: u64,
    /// The worker mailboxes: `MAX_WORKERS` rings of `mbox_size` bytes.
    pub mbox_off: u64,
    pub mbox_size: u64,
    /// The subscription tables: `MAX_WORKERS` tables of `ps_size` bytes,
    /// each with `ps_cap` entries followed by its pattern records.
    pub ps_off: u64,
    pub ps_size: u64,
    pub ps_cap: u64,
    /// The transaction log ring (log/ring.rs).
    pub log_off: u64,
    pub log_size: u64,
    /// The user table area (users.rs).
    pub users_off: u64,
    pub users_size: u64,
    /// The queue head tables (waiters.rs): `MAX_WORKERS` tables of
    /// `wq_size` bytes, each with `wq_cap` records.
    pub wq_off: u64,
    pub wq_size: u64,
    pub wq_cap: u64,
}

/// Smallest segment accepted.
pub const MIN_SEGMENT: u64 = 1 << 20;

impl Geometry {
    /// The one layout a segment of `seg_size` bytes with `ctx_count` contexts has.
    pub(crate) fn compute(seg_size: u64, ctx_count: u32) -> Result<Geometry> {
        if seg_size < MIN_SEGMENT {
            return Err(Error::Attach(format!(
                "segment size {seg_size} is below the minimum of {MIN_SEGMENT} bytes"
            )));
        }
        if seg_size > 1 << 47 || ctx_count == 0 || ctx_count > 65_000 {
            return Err(Error::Attach(format!(
                "unsupported geometry: {seg_size} bytes, {ctx_count} contexts"
            )));
        }
        let ctx_off = HEADER_SIZE;
        let mbox_off = align_up(ctx_off + ctx_count as u64 * CTX_SIZE, 4096);
        // A mailbox carries control messages and replies between workers
        // (CLIENT LIST, CONFIG SET, later pub/sub): big ones on big segments.
        let mbox_size: u64 = match seg_size {
            s if s >= 256 << 20 => 256 << 10,
            s if s >= 16 << 20 => 64 << 10,
            _ => 4 << 10,
        };
        // Channels a worker's subscribers can hold before its table
        // overflows (then publishers send it every message), and bytes of
        // patterns.
        let (ps_cap, ps_patterns): (u64, u64) = match seg_size {
            s if s >= 1 << 30 => (32 << 10, 64 << 10),
            s if s >= 256 << 20 => (8 << 10, 16 << 10),
            s if s >= 16 << 20 => (1 << 10, 8 << 10),
            _ => (32, 1 << 10),
        };
        let ps_off = align_up(mbox_off + MAX_WORKERS as u64 * mbox_size, 4096);
        let ps_size = align_up(PS_ENTRIES + ps_cap * PS_ENTRY + ps_patterns, 64);
        // The log ring: the largest record is half of it (log/ring.rs).
        let log_size: u64 = match seg_size {
            s if s >= 1 << 30 => 64 << 20,
            s if s >= 256 << 20 => 16 << 20,
            s if s >= 16 << 20 => 2 << 20,
            _ => 64 << 10,
        };
        let log_off = align_up(ps_off + MAX_WORKERS as u64 * ps_size, 4096);
        // The ACL user table: two copies of its text (users.rs).
        let users_size: u64 = match seg_size {
            s if s >= 16 << 20 => U_BYTES + 2 * (64 << 10),
            _ => U_BYTES + 2 * (8 << 10),
        };
        let users_off = align_up(log_off + log_size, 4096);
        // Keys with blocked clients a worker can order against other
        // workers' (waiters.rs): beyond them its heads are unknown.
        let wq_cap: u64 = match seg_size {
            s if s >= 16 << 20 => 1 << 10,
            _ => 32,
        };
        let wq_off = align_up(users_off + users_size, 4096);
        let wq_size = WQ_RECORDS + wq_cap * WQ_RECORD;
        let index_off = align_up(wq_off + MAX_WORKERS as u64 * wq_size, 4096);
        // One sixteenth of the segment for the table: about 8 bytes of index per
        // key when the arena is full of small entries, with chains absorbing more.
        let buckets = (seg_size / 16 / BUCKET_SIZE).max(64);
        let arena_off = align_up(index_off + buckets * BUCKET_SIZE, 4096);
        if arena_off + (256 << 10) > seg_size {
            return Err(Error::Attach(format!(
                "segment size {seg_size} leaves no room for values with {ctx_count} contexts"
            )));
        }
        Ok(Geometry {
            seg_size,
            ctx_off,
            ctx_count,
            index_off,
            buckets,
            arena_off,
            arena_size: seg_size - arena_off,
            mbox_off,
            mbox_size,
            ps_off,
            ps_size,
            ps_cap,
            log_off,
            log_size,
            users_off,
            users_size,
            wq_off,
            wq_size,
            wq_cap,
        })
    }
}

/// One mapping of a segment, shared by every handle of this process.
pub(crate) struct Shared {
    /// How a dead context's recovery reaches the layers above.
    pub hooks: crate::segment::context::RecoveryHooks,
    pub region: Region,
    pub geo: Geometry,
    pub path: PathBuf,
    pub clock: Clock,
    pub created: bool,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |e| Error::Io(what, e)
}

/// The file behind a location; a name goes to hugetlbfs when huge pages are
/// reserved and big enough for the whole segment, else to /dev/shm.
pub(crate) fn resolve(loc: &Location, size: u64) -> PathBuf {
    match loc {
        Location::Path(p) => p.clone(),
        Location::Name(name) => {
            let name = name.trim_start_matches('/');
            let shm = Path::new("/dev/shm").join(name);
            let huge = Path::new("/dev/hugepages").join(name);
            if shm.exists() {
                shm
            } else if huge.exists() || (size > 0 && huge_pages_free() >= size) {
                huge
            } else {
                shm
            }
        }
    }
}

/// Bytes of free reserved huge pages (0 when none are reserved, as by default).
fn huge_pages_free() -> u64 {
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
        return 0;
    };
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mounted = std::fs::read_to_string("/proc/mounts")
        .map(|m| m.lines().any(|l| l.contains(" /dev/hugepages hugetlbfs ")))
        .unwrap_or(false);
    if !mounted {
        return 0;
    }
    field("HugePages_Free:") * field("Hugepagesize:") * 1024
}

pub(crate) fn open(opts: &OpenOptions, hooks: RecoveryHooks) -> Result<Shared> {
    let path = resolve(&opts.location, opts.size);
    if opts.create {
        match FsOpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => return create(file, path, opts, hooks),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::Io(format!("create {}", path.display()), e)),
        }
    }
    attach(path, opts.clock.clone(), hooks)
}

fn create(file: File, path: PathBuf, opts: &OpenOptions, hooks: RecoveryHooks) -> Result<Shared> {
    let page = if path.starts_with("/dev/hugepages") {
        2 << 20
    } else {
        4096
    };
    let size = align_up(opts.size, page);
    let made = (|| {
        // Context records take at most a quarter of a small segment.
        let contexts = opts.contexts.min((size / 4 / CTX_SIZE).max(1) as u32);
        let geo = Geometry::compute(size, contexts)?;
        file.set_len(size)
            .map_err(io(format!("size {} to {size} bytes", path.display())))?;
        let mut region = Region::map(&file, size)?;
        region.set_arena(geo.arena_off, geo.arena_off + geo.arena_size);
        let created_ms = opts.clock.now_ms();
        init_header(&region, &geo, page, created_ms)?;
        crate::segment::alloc::init(&region, &geo)?;
        // Invariant I2: the version is the last word written, with release
        // ordering, so an attacher that sees it sees everything above.
        region.store32(H_VERSION, LAYOUT_VERSION)?;
        Ok(Shared {
            hooks,
            region,
            geo,
            path: path.clone(),
            clock: opts.clock.clone(),
            created: true,
        })
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    made
}

fn init_header(region: &Region, geo: &Geometry, page: u64, created_ms: u64) -> Result<()> {
    region.write_bytes(H_MAGIC, &MAGIC)?;
    region.store32(H_HEADER_SIZE, HEADER_SIZE as u32)?;
    region.store64(H_SEG_SIZE, geo.seg_size)?;
    region.store64(H_CTX_OFF, geo.ctx_off)?;
    region.store32(H_CTX_COUNT, geo.ctx_count)?;
    region.store32(H_CTX_SIZE, CTX_SIZE as u32)?;
    region.store64(H_INDEX_OFF, geo.index_off)?;
    region.store64(H_BUCKETS, geo.buckets)?;
    region.store64(H_ARENA_OFF, geo.arena_off)?;
    region.store64(H_ARENA_SIZE, geo.arena_size)?;
    region.store32(H_CREATOR_PID, std::process::id())?;
    region.store32(H_CREATOR_UID, current_uid())?;
    region.store64(H_CREATED_MS, created_ms)?;
    region.store64(H_PAGE_SIZE, page)?;
    region.store64(H_MBOX_OFF, geo.mbox_off)?;
    region.store64(H_MBOX_SIZE, geo.mbox_size)?;
    region.store64(H_PS_OFF, geo.ps_off)?;
    region.store64(H_PS_SIZE, geo.ps_size)?;
    region.store64(H_PS_CAP, geo.ps_cap)?;
    region.store64(H_LOG_OFF, geo.log_off)?;
    region.store64(H_LOG_SIZE, geo.log_size)?;
    region.store64(H_USERS_OFF, geo.users_off)?;
    region.store64(H_USERS_SIZE, geo.users_size)?;
    region.store64(H_NEXT_CLIENT_ID, 1)?;
    region.store32(H_SAMPLES, 5)?;
    region.store32(H_LFU_LOG_FACTOR, DEFAULT_LFU_LOG_FACTOR)?;
    region.store32(H_LFU_DECAY_TIME, DEFAULT_LFU_DECAY_TIME)?;
    Ok(())
}

pub(crate) fn current_uid() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

fn attach(path: PathBuf, clock: Clock, hooks: RecoveryHooks) -> Result<Shared> {
    let shown = path.display().to_string();
    let file = FsOpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => Error::Attach(format!("no segment at {shown}")),
            ErrorKind::PermissionDenied => Error::Attach(format!(
                "segment {shown} is not readable and writable by this user"
            )),
            _ => Error::Io(format!("open {shown}"), e),
        })?;
    let meta = file.metadata().map_err(io(format!("stat {shown}")))?;
    let me = current_uid();
    if meta.uid() != me {
        return Err(Error::Attach(format!(
            "segment {shown} is owned by uid {}, not by this user (uid {me}); refusing to attach",
            meta.uid()
        )));
    }
    let file_len = meta.len();
    if file_len < HEADER_SIZE {
        return Err(Error::Attach(format!(
            "segment {shown} is truncated: {file_len} bytes, smaller than its header"
        )));
    }
    let header = Region::map(&file, HEADER_SIZE)?;
    let mut magic = Vec::with_capacity(8);
    header.read_bytes(H_MAGIC, 8, &mut magic)?;
    if magic != MAGIC {
        return Err(Error::Attach(format!(
            "{shown} is not a shoal segment (bad magic)"
        )));
    }
    let version = wait_for_version(&header, &shown)?;
    if version != LAYOUT_VERSION {
        return Err(Error::Attach(format!(
            "segment {shown} has layout version {version}; this build uses version \
             {LAYOUT_VERSION}. Snapshot it with the matching binary, or remove it to start empty"
        )));
    }
    let seg_size = header.load64(H_SEG_SIZE)?;
    let ctx_count = header.load32(H_CTX_COUNT)?;
    if file_len < seg_size {
        return Err(Error::Attach(format!(
            "segment {shown} is truncated: the file has {file_len} bytes, its header says {seg_size}"
        )));
    }
    let geo = Geometry::compute(seg_size, ctx_count)
        .map_err(|e| Error::Attach(format!("segment {shown} has a bad geometry: {e}")))?;
    let stored = Geometry {
        seg_size,
        ctx_off: header.load64(H_CTX_OFF)?,
        ctx_count,
        index_off: header.load64(H_INDEX_OFF)?,
        buckets: header.load64(H_BUCKETS)?,
        arena_off: header.load64(H_ARENA_OFF)?,
        arena_size: header.load64(H_ARENA_SIZE)?,
        mbox_off: header.load64(H_MBOX_OFF)?,
        mbox_size: header.load64(H_MBOX_SIZE)?,
        ps_off: header.load64(H_PS_OFF)?,
        ps_size: header.load64(H_PS_SIZE)?,
        ps_cap: header.load64(H_PS_CAP)?,
        log_off: header.load64(H_LOG_OFF)?,
        log_size: header.load64(H_LOG_SIZE)?,
        users_off: header.load64(H_USERS_OFF)?,
        users_size: header.load64(H_USERS_SIZE)?,
        // Derived from the stored offsets' geometry (the index offset, which
        // is stored, follows it).
        wq_off: geo.wq_off,
        wq_size: geo.wq_size,
        wq_cap: geo.wq_cap,
    };
    if stored != geo
        || header.load32(H_HEADER_SIZE)? as u64 != HEADER_SIZE
        || header.load32(H_CTX_SIZE)? as u64 != CTX_SIZE
    {
        return Err(Error::Attach(format!(
            "segment {shown} has a geometry that does not match its size (corrupted header)"
        )));
    }
    drop(header);
    let mut region = Region::map(&file, seg_size)?;
    region.set_arena(geo.arena_off, geo.arena_off + geo.arena_size);
    Ok(Shared {
        hooks,
        region,
        geo,
        path,
        clock,
        created: false,
    })
}

/// Waits (bounded) for a creator that is still initializing; a creator that
/// died before publishing the version leaves a segment nobody can trust.
fn wait_for_version(header: &Region, shown: &str) -> Result<u32> {
    let start = Instant::now();
    loop {
        let v = header.load32(H_VERSION)?;
        if v != 0 {
            return Ok(v);
        }
        let creator = header.load32(H_CREATOR_PID)?;
        let gone = creator != 0 && !crate::segment::context::process_alive(creator, 0);
        if gone || start.elapsed() > Duration::from_secs(5) {
            return Err(Error::Attach(format!(
                "segment {shown} was never fully initialized (its creator stopped); remove it and start again"
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
