//! `shoal bench pubsub`: one publisher and N subscribers of one channel on
//! any RESP server (shoal or redis-server). First messages delivered per
//! second with the publisher at full speed, then publish-to-receive latency
//! at a fixed rate. Prints figures; asserts nothing.
//!
//! Every payload starts with the send time (nanoseconds since the start of
//! this process's run, so both ends read one clock), the publisher's sequence
//! number and the phase, so each subscriber also checks that it got every
//! message once and in publish order.
//!
//! One thread runs every connection: the machine the benchmarks run on has
//! two cores, shared by the server and this client.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::timeout;

/// Arguments of `shoal bench pubsub`.
#[derive(Args)]
pub struct PubsubBench {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Server port (RESP).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Number of subscriber connections.
    #[arg(long, default_value_t = 1)]
    subscribers: usize,
    /// Message size in bytes (at least 33: send time, sequence and phase).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Throughput phase: seconds measured (after the warm-up); 0 skips it.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Throughput phase: publish this many messages instead of --seconds.
    #[arg(long)]
    messages: Option<u64>,
    /// Throughput phase: seconds at full speed before the measured window.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Publisher batch: PUBLISH commands written at once.
    #[arg(long, default_value_t = 64)]
    pipeline: usize,
    /// Most messages the publisher may be ahead of its PUBLISH replies and
    /// of the slowest subscriber, so that the server's buffers stay bounded.
    #[arg(long, default_value_t = 1024)]
    window: u64,
    /// Latency phase: messages per second (0 = as fast as possible).
    #[arg(long, default_value_t = 5000)]
    rate: u64,
    /// Latency phase: seconds; 0 skips it.
    #[arg(long, default_value_t = 3.0)]
    latency_seconds: f64,
    /// The channel.
    #[arg(long, default_value = "shoal-bench-pubsub")]
    channel: String,
    /// Spread the subscribers evenly over this many workers, the first on
    /// one that is not the publisher's, reconnecting until each lands where
    /// it should, when `CLIENT INFO` names the connection's worker (shoal's
    /// `worker=N`; redis-server has none). 0 takes the connections as they
    /// come.
    #[arg(long, default_value_t = 2)]
    workers_check: usize,
}

/// A payload's fixed prefix: 16 hex digits of send time, 16 of sequence, the phase.
const HEADER: usize = 33;
/// Phase tags in the payload; only `LATENCY` messages go into the histogram.
const WARMUP: u8 = b'W';
const THROUGHPUT: u8 = b'T';
const LATENCY: u8 = b'L';
/// How long without any progress (reply or delivery) counts as a stall.
const STALL: Duration = Duration::from_secs(10);
/// Connections tried per subscriber while balancing over workers.
const MAX_ATTEMPTS: usize = 100;
/// Initial read buffer of a connection (grows for a larger frame).
const READ_BUF: usize = 64 * 1024;
/// Largest reply taken: a longer one is an error, not a buffer that grows
/// without end.
const MAX_REPLY: usize = 64 << 20;

/// Runs `shoal bench pubsub`.
pub fn run(b: &PubsubBench) -> Result<()> {
    if b.size < HEADER {
        bail!("--size must be at least {HEADER}");
    }
    if b.subscribers == 0 || b.pipeline == 0 {
        bail!("--subscribers and --pipeline must be at least 1");
    }
    let addr = (b.host.as_str(), b.port)
        .to_socket_addrs()
        .with_context(|| format!("resolve {}", b.host))?
        .next()
        .ok_or_else(|| anyhow!("no address for {}", b.host))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(bench(b, addr))
}

/// One scalar of a RESP reply.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Item<'a> {
    Simple(&'a [u8]),
    Error(&'a [u8]),
    Int(i64),
    Bulk(Option<&'a [u8]>),
}

/// Elements an array reply may have: every reply this client expects
/// (subscribe confirmations, messages, integers, bulk strings) is a scalar or
/// a flat array of at most four scalars.
const MAX_ITEMS: usize = 4;

/// A reply: one scalar (`array` false, `len` 1) or a flat array, RESP3
/// push included (`len` 0 for a nil array).
struct Frame<'a> {
    array: bool,
    len: usize,
    items: [Item<'a>; MAX_ITEMS],
}

impl Frame<'_> {
    fn items(&self) -> &[Item<'_>] {
        &self.items[..self.len]
    }

    /// The reply as text, for error messages.
    fn describe(&self) -> String {
        let item = |i: &Item| match i {
            Item::Simple(s) => String::from_utf8_lossy(s).into_owned(),
            Item::Error(s) => format!("(error) {}", String::from_utf8_lossy(s)),
            Item::Int(n) => format!("(integer) {n}"),
            Item::Bulk(None) => "(nil)".to_string(),
            Item::Bulk(Some(s)) => format!("{:?}", String::from_utf8_lossy(s)),
        };
        let parts: Vec<String> = self.items().iter().map(item).collect();
        let text = if self.array {
            format!("[{}]", parts.join(", "))
        } else {
            parts.concat()
        };
        text.chars().take(200).collect()
    }
}

/// A line ending in CRLF at `pos`: the line without it and where the next starts.
fn line(buf: &[u8], pos: usize) -> Result<Option<(&[u8], usize)>, String> {
    let Some(rest) = buf.get(pos..) else {
        return Ok(None);
    };
    match rest.iter().position(|&b| b == b'\n') {
        None => Ok(None),
        Some(0) => Err("line without CR".into()),
        Some(nl) if rest[nl - 1] != b'\r' => Err("line without CR".into()),
        Some(nl) => Ok(Some((&rest[..nl - 1], pos + nl + 1))),
    }
}

fn int(text: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad number {:?}", String::from_utf8_lossy(text)))
}

/// One scalar at `pos`, or `None` when the buffer does not hold all of it yet.
fn item(buf: &[u8], pos: usize) -> Result<Option<(Item<'_>, usize)>, String> {
    let Some((l, next)) = line(buf, pos)? else {
        return Ok(None);
    };
    let (kind, body) = l.split_first().ok_or("empty line")?;
    let it = match kind {
        b'+' => Item::Simple(body),
        b'-' | b'!' => Item::Error(body),
        b':' => Item::Int(int(body)?),
        b'_' => Item::Bulk(None),
        b'$' | b'=' => {
            let n = int(body)?;
            if n < 0 {
                return Ok(Some((Item::Bulk(None), next)));
            }
            let end = next.checked_add(n as usize).ok_or("bulk length")?;
            match buf.get(end..end + 2) {
                None => return Ok(None),
                Some(b"\r\n") => return Ok(Some((Item::Bulk(Some(&buf[next..end])), end + 2))),
                Some(_) => return Err("bulk string without CRLF".into()),
            }
        }
        b'*' | b'>' => return Err("nested array".into()),
        other => return Err(format!("unknown reply type {:?}", *other as char)),
    };
    Ok(Some((it, next)))
}

/// One reply at the start of `buf` and its length, or `None` when `buf`
/// does not hold all of it yet.
fn parse_frame(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, String> {
    let mut frame = Frame {
        array: false,
        len: 0,
        items: [Item::Bulk(None); MAX_ITEMS],
    };
    let Some(first) = buf.first() else {
        return Ok(None);
    };
    if !matches!(first, b'*' | b'>') {
        return Ok(item(buf, 0)?.map(|(it, used)| {
            frame.items[0] = it;
            frame.len = 1;
            (frame, used)
        }));
    }
    let Some((l, mut pos)) = line(buf, 0)? else {
        return Ok(None);
    };
    frame.array = true;
    let n = int(&l[1..])?;
    if n > MAX_ITEMS as i64 {
        return Err(format!("array of {n} elements"));
    }
    for i in 0..n.max(0) as usize {
        let Some((it, next)) = item(buf, pos)? else {
            return Ok(None);
        };
        frame.items[i] = it;
        frame.len = i + 1;
        pos = next;
    }
    Ok(Some((frame, pos)))
}

/// The read side of a connection: a buffer of bytes not yet parsed.
struct Reader<R> {
    io: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    fn new(io: R) -> Self {
        Reader {
            io,
            buf: vec![0; READ_BUF],
            start: 0,
            end: 0,
        }
    }

    /// Reads more bytes after those not parsed yet; an error at end of file.
    async fn fill(&mut self) -> Result<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < MAX_REPLY {
                self.buf.resize(self.buf.len() * 2, 0);
            } else {
                bail!("a reply longer than {MAX_REPLY} bytes");
            }
        }
        let n = self.io.read(&mut self.buf[self.end..]).await?;
        if n == 0 {
            bail!("connection closed by the server");
        }
        self.end += n;
        Ok(())
    }

    /// Hands every complete reply in the buffer to `f`, in order.
    fn each_frame(&mut self, mut f: impl FnMut(&Frame<'_>) -> Result<()>) -> Result<()> {
        while self.start < self.end {
            match parse_frame(&self.buf[self.start..self.end]) {
                Ok(Some((frame, used))) => {
                    f(&frame)?;
                    self.start += used;
                }
                Ok(None) => break,
                Err(e) => bail!("bad reply: {e}"),
            }
        }
        Ok(())
    }

    /// Waits for the next reply and returns what `f` makes of it.
    async fn frame<T>(&mut self, f: impl FnOnce(&Frame<'_>) -> T) -> Result<T> {
        loop {
            match parse_frame(&self.buf[self.start..self.end]) {
                Ok(Some((frame, used))) => {
                    let t = f(&frame);
                    self.start += used;
                    return Ok(t);
                }
                Ok(None) => self.fill().await?,
                Err(e) => bail!("bad reply: {e}"),
            }
        }
    }
}

/// A command in RESP.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn put_hex(out: &mut [u8], mut n: u64) {
    for b in out.iter_mut().rev() {
        *b = b"0123456789abcdef"[(n & 15) as usize];
        n >>= 4;
    }
}

fn hex(text: &[u8]) -> Option<u64> {
    text.iter().try_fold(0u64, |n, &c| {
        let d = (c as char).to_digit(16)?;
        Some((n << 4) | u64::from(d))
    })
}

/// State that the subscriber tasks, the publisher and its reply reader share.
struct Shared {
    start: Instant,
    /// Messages each subscriber received so far.
    received: Vec<AtomicU64>,
    /// PUBLISH replies read.
    replied: AtomicU64,
    /// PUBLISH replies that did not count every subscriber, and the lowest
    /// and highest counts seen.
    receiver_mismatch: AtomicU64,
    receivers_min: AtomicU64,
    receivers_max: AtomicU64,
    /// Messages whose sequence number skipped ahead (lost ones) or went back
    /// (duplicated or reordered ones), over all subscribers.
    gaps: AtomicU64,
    backwards: AtomicU64,
    /// Publish-to-receive nanoseconds of the latency phase's messages.
    latency: Mutex<Histogram<u64>>,
    /// The first errors of any connection; `failed` once there is one.
    errors: Mutex<Vec<String>>,
    failed: AtomicBool,
    /// Woken whenever a reply or a delivery arrives.
    progress: Notify,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn min_received(&self) -> u64 {
        self.received
            .iter()
            .map(|c| c.load(Relaxed))
            .min()
            .unwrap_or(0)
    }

    fn total_received(&self) -> u64 {
        self.received.iter().map(|c| c.load(Relaxed)).sum()
    }

    fn fail(&self, who: String, e: anyhow::Error) {
        if let Ok(mut errors) = self.errors.lock() {
            if errors.len() < 5 {
                errors.push(format!("{who}: {e:#}"));
            }
        }
        self.failed.store(true, Relaxed);
        self.progress.notify_one();
    }

    fn check(&self) -> Result<()> {
        if self.failed.load(Relaxed) {
            let errors = self.errors.lock().map(|e| e.join("; ")).unwrap_or_default();
            bail!("{errors}");
        }
        Ok(())
    }

    /// Waits until `ready` holds; false when nothing arrived for `STALL`.
    async fn wait_for(&self, ready: impl Fn(&Shared) -> bool) -> Result<bool> {
        let mark = |s: &Shared| (s.replied.load(Relaxed), s.total_received());
        let mut last = mark(self);
        loop {
            self.check()?;
            if ready(self) {
                return Ok(true);
            }
            if timeout(STALL, self.progress.notified()).await.is_err() {
                let now = mark(self);
                if now == last {
                    return Ok(false);
                }
                last = now;
            }
        }
    }
}

/// Reads a subscriber's messages until the connection fails.
async fn subscriber<R: AsyncRead + Unpin>(
    mut r: Reader<R>,
    shared: Arc<Shared>,
    index: usize,
) -> Result<()> {
    let mut count = 0u64;
    let mut next_seq = 0u64;
    loop {
        r.fill().await?;
        let now = shared.now_ns();
        let mut lat: Vec<u64> = Vec::new();
        r.each_frame(|f| {
            let payload = match f.items() {
                [Item::Bulk(Some(b"message")), _, Item::Bulk(Some(p))] if f.array => *p,
                _ => bail!("unexpected reply {}", f.describe()),
            };
            let (sent, seq) = match (payload.get(..16), payload.get(16..32)) {
                (Some(t), Some(s)) => (hex(t), hex(s)),
                _ => (None, None),
            };
            let (Some(sent), Some(seq)) = (sent, seq) else {
                bail!("message without this benchmark's header");
            };
            if seq > next_seq {
                shared.gaps.fetch_add(seq - next_seq, Relaxed);
            } else if seq < next_seq {
                shared.backwards.fetch_add(1, Relaxed);
            }
            next_seq = next_seq.max(seq + 1);
            if payload.get(32) == Some(&LATENCY) {
                lat.push(now.saturating_sub(sent));
            }
            count += 1;
            Ok(())
        })?;
        shared.received[index].store(count, Relaxed);
        if !lat.is_empty() {
            if let Ok(mut h) = shared.latency.lock() {
                for ns in lat {
                    h.saturating_record(ns.max(1));
                }
            }
        }
        shared.progress.notify_one();
    }
}

/// Reads PUBLISH replies until the connection fails.
async fn publish_replies<R: AsyncRead + Unpin>(
    mut r: Reader<R>,
    shared: Arc<Shared>,
    expected: u64,
) -> Result<()> {
    loop {
        r.fill().await?;
        let mut n = 0;
        r.each_frame(|f| match f.items() {
            [Item::Int(k)] if !f.array => {
                let k = (*k).max(0) as u64;
                if k != expected {
                    shared.receiver_mismatch.fetch_add(1, Relaxed);
                }
                shared.receivers_min.fetch_min(k, Relaxed);
                shared.receivers_max.fetch_max(k, Relaxed);
                n += 1;
                Ok(())
            }
            _ => bail!("PUBLISH answered {}", f.describe()),
        })?;
        shared.replied.fetch_add(n, Relaxed);
        shared.progress.notify_one();
    }
}

async fn connect(
    addr: SocketAddr,
) -> Result<(Reader<tokio::net::tcp::OwnedReadHalf>, OwnedWriteHalf)> {
    let s = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to {addr}"))?;
    s.set_nodelay(true)?;
    let (r, w) = s.into_split();
    Ok((Reader::new(r), w))
}

/// The worker a connection is on, from `worker=N` in `CLIENT INFO`.
async fn worker_of(
    r: &mut Reader<tokio::net::tcp::OwnedReadHalf>,
    w: &mut OwnedWriteHalf,
) -> Result<Option<u64>> {
    w.write_all(&command(&[b"CLIENT", b"INFO"])).await?;
    let reply = timeout(
        STALL,
        r.frame(|f| match f.items() {
            [Item::Bulk(Some(text))] => Some(String::from_utf8_lossy(text).into_owned()),
            _ => None,
        }),
    )
    .await
    .context("no reply to CLIENT INFO")??;
    Ok(reply.and_then(|text| {
        text.split_whitespace()
            .find_map(|kv| kv.strip_prefix("worker="))
            .and_then(|n| n.parse().ok())
    }))
}

/// A publisher phase ends at a time or after a number of messages.
#[derive(Clone, Copy)]
enum Until {
    Time(Instant),
    Count(u64),
}

/// The publisher's write side: one PUBLISH command template whose payload
/// header is rewritten for every message.
struct Publisher<'a> {
    w: OwnedWriteHalf,
    shared: &'a Shared,
    template: Vec<u8>,
    /// Where the payload starts in `template`.
    payload_at: usize,
    batch: Vec<u8>,
    sent: u64,
    pipeline: u64,
    window: u64,
}

impl Publisher<'_> {
    /// Publishes with `tag` until `until`, at `rate` messages per second
    /// (0: as fast as the window allows); returns how many it sent.
    async fn phase(&mut self, tag: u8, until: Until, rate: u64) -> Result<u64> {
        let t0 = Instant::now();
        let mut n = 0u64;
        loop {
            let now = Instant::now();
            let left = match until {
                Until::Time(t) if now >= t => break,
                Until::Time(_) => u64::MAX,
                Until::Count(c) if n >= c => break,
                Until::Count(c) => c - n,
            };
            let mut want = self.pipeline.min(left);
            if rate > 0 {
                // Message k is due k / rate seconds after the phase starts.
                let due = ((now - t0).as_secs_f64() * rate as f64) as u64 + 1;
                if due <= n {
                    let mut at = t0 + Duration::from_secs_f64(n as f64 / rate as f64);
                    if let Until::Time(t) = until {
                        at = at.min(t);
                    }
                    tokio::time::sleep_until(at.into()).await;
                    continue;
                }
                want = want.min(due - n);
            }
            self.wait_window(want).await?;
            self.send(tag, want).await?;
            n += want;
        }
        Ok(n)
    }

    /// Waits until `want` more messages keep the publisher within its
    /// window: at most `window` messages ahead of the PUBLISH replies and of
    /// the slowest subscriber.
    async fn wait_window(&self, want: u64) -> Result<()> {
        let after = self.sent + want;
        let window = self.window.max(want);
        let ready = self
            .shared
            .wait_for(|s| {
                after - s.replied.load(Relaxed).min(after) <= window
                    && after - s.min_received().min(after) <= window
            })
            .await?;
        if !ready {
            bail!(
                "stalled for {} s: published {}, {} PUBLISH replies, the slowest subscriber received {}",
                STALL.as_secs(),
                self.sent,
                self.shared.replied.load(Relaxed),
                self.shared.min_received()
            );
        }
        Ok(())
    }

    async fn send(&mut self, tag: u8, count: u64) -> Result<()> {
        self.batch.clear();
        let p = self.payload_at;
        for _ in 0..count {
            let start = self.batch.len();
            self.batch.extend_from_slice(&self.template);
            let payload = &mut self.batch[start + p..];
            put_hex(&mut payload[16..32], self.sent);
            payload[32] = tag;
            put_hex(&mut payload[..16], self.shared.now_ns());
            self.sent += 1;
        }
        self.w.write_all(&self.batch).await?;
        Ok(())
    }
}

/// CPU time this thread has used, from /proc (None where it is missing).
fn thread_cpu() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Figures of one run.
struct Outcome {
    published_per_s: f64,
    delivered_per_s: f64,
    client_cpu: Option<f64>,
    latency_client_cpu: Option<f64>,
    latency_sent: u64,
    latency_secs: f64,
    drained: bool,
    lost: u64,
}

async fn bench(b: &PubsubBench, addr: SocketAddr) -> Result<()> {
    let n = b.subscribers;
    println!(
        "shoal bench pubsub: {addr}, channel {}, {n} subscriber{}, {}-byte messages",
        b.channel,
        if n == 1 { "" } else { "s" },
        b.size
    );

    // The publisher first, then the subscribers, placed round-robin over
    // the workers starting with one that is not the publisher's (so a single
    // subscriber is always on another worker) when the server names them.
    let (mut pr, mut pw) = connect(addr).await?;
    let pub_worker = if b.workers_check > 0 {
        worker_of(&mut pr, &mut pw).await?
    } else {
        None
    };
    let mut split: BTreeMap<u64, usize> = BTreeMap::new();
    let mut reconnects = 0usize;
    let mut subs = Vec::with_capacity(n);
    let workers = b.workers_check as u64;
    for i in 0..n as u64 {
        let target = pub_worker.map(|p| (p + 1 + i) % workers);
        let mut attempt = 0;
        loop {
            let (mut r, mut w) = connect(addr).await?;
            attempt += 1;
            let worker = match target {
                Some(_) => worker_of(&mut r, &mut w).await?,
                None => None,
            };
            if worker != target && attempt < MAX_ATTEMPTS {
                reconnects += 1;
                continue;
            }
            if let Some(id) = worker {
                *split.entry(id).or_default() += 1;
            }
            subs.push((r, w));
            break;
        }
    }
    // Subscribers on the publisher's worker / on the others.
    let split_text = match pub_worker {
        Some(p) => {
            let local = split.get(&p).copied().unwrap_or(0);
            format!("{local}/{}", split.values().sum::<usize>() - local)
        }
        None => "-".to_string(),
    };
    match pub_worker {
        Some(p) => {
            let parts: Vec<String> = split
                .iter()
                .map(|(w, c)| format!("worker {w}: {c}"))
                .collect();
            println!(
                "publisher on worker {p}; subscribers on {} ({reconnects} reconnects)",
                parts.join(", ")
            );
        }
        None if b.workers_check > 0 => {
            println!("CLIENT INFO names no worker: subscribers not placed");
        }
        None => {}
    }

    let subscribe = command(&[b"SUBSCRIBE", b.channel.as_bytes()]);
    for (_, w) in &mut subs {
        w.write_all(&subscribe).await?;
    }
    for (i, (r, _)) in subs.iter_mut().enumerate() {
        let ok = timeout(
            STALL,
            r.frame(|f| match f.items() {
                [Item::Bulk(Some(b"subscribe")), Item::Bulk(Some(_)), Item::Int(1)] if f.array => {
                    Ok(())
                }
                _ => Err(f.describe()),
            }),
        )
        .await
        .with_context(|| {
            format!(
                "subscriber {i}: no SUBSCRIBE confirmation within {} s",
                STALL.as_secs()
            )
        })??;
        if let Err(reply) = ok {
            bail!("subscriber {i}: SUBSCRIBE answered {reply}");
        }
    }

    let shared = Arc::new(Shared {
        start: Instant::now(),
        received: (0..n).map(|_| AtomicU64::new(0)).collect(),
        replied: AtomicU64::new(0),
        receiver_mismatch: AtomicU64::new(0),
        receivers_min: AtomicU64::new(u64::MAX),
        receivers_max: AtomicU64::new(0),
        gaps: AtomicU64::new(0),
        backwards: AtomicU64::new(0),
        latency: Mutex::new(Histogram::new_with_bounds(1, 60_000_000_000, 3)?),
        errors: Mutex::new(Vec::new()),
        failed: AtomicBool::new(false),
        progress: Notify::new(),
    });
    let mut tasks = Vec::new();
    // The write halves stay open until the end: dropping one shuts the
    // connection's sending side, which some servers take as a disconnect.
    let mut keep = Vec::new();
    for (i, (r, w)) in subs.into_iter().enumerate() {
        let s = shared.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(e) = subscriber(r, s.clone(), i).await {
                s.fail(format!("subscriber {i}"), e);
            }
        }));
        keep.push(w);
    }
    {
        let s = shared.clone();
        let expected = n as u64;
        tasks.push(tokio::spawn(async move {
            if let Err(e) = publish_replies(pr, s.clone(), expected).await {
                s.fail("publisher".into(), e);
            }
        }));
    }

    let mut payload = vec![b'x'; b.size];
    payload[32] = WARMUP;
    let template = command(&[b"PUBLISH", b.channel.as_bytes(), &payload]);
    let payload_at = template.len() - 2 - b.size;
    let mut p = Publisher {
        w: pw,
        shared: &shared,
        template,
        payload_at,
        batch: Vec::new(),
        sent: 0,
        pipeline: b.pipeline as u64,
        window: b.window.max(b.pipeline as u64),
    };
    let result = run_phases(b, &mut p, &shared).await;
    for t in &tasks {
        t.abort();
    }
    drop(keep);
    let o = result?;

    let nn = n as u64;
    if b.seconds > 0.0 || b.messages.is_some() {
        let cpu = o.client_cpu.map_or(String::new(), |c| {
            format!(", client CPU {:.0}% of a core", c * 100.0)
        });
        println!(
            "throughput: published {:.0} msg/s, delivered {:.0} msg/s{cpu}",
            o.published_per_s, o.delivered_per_s
        );
    }
    let h = shared
        .latency
        .lock()
        .map_err(|_| anyhow!("latency histogram lock"))?;
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    if b.latency_seconds > 0.0 {
        println!(
            "latency: {} msg/s asked, {:.0} msg/s published for {:.1} s, {} deliveries: \
             p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us{}",
            b.rate,
            o.latency_sent as f64 / o.latency_secs,
            o.latency_secs,
            h.len(),
            us(0.5),
            us(0.99),
            us(0.999),
            h.max() as f64 / 1000.0,
            o.latency_client_cpu.map_or(String::new(), |c| {
                format!(", client CPU {:.0}% of a core", c * 100.0)
            })
        );
    }
    let gaps = shared.gaps.load(Relaxed);
    let backwards = shared.backwards.load(Relaxed);
    let mismatch = shared.receiver_mismatch.load(Relaxed);
    if o.drained && gaps == 0 && backwards == 0 && mismatch == 0 {
        println!(
            "check: every subscriber received all {} messages once and in order; PUBLISH counted {n} receivers each time",
            p.sent
        );
    } else {
        println!(
            "check: {} of {} deliveries missing{}, {gaps} skipped by a sequence gap, {backwards} out of order or repeated, \
             {mismatch} PUBLISH replies not counting {n} receivers (counts seen {}..{})",
            o.lost,
            p.sent * nn,
            if o.drained { "" } else { " after waiting" },
            shared.receivers_min.load(Relaxed).min(shared.receivers_max.load(Relaxed)),
            shared.receivers_max.load(Relaxed)
        );
    }
    println!(
        "RESULT subscribers={n} split={split_text} published_per_s={:.0} delivered_per_s={:.0} \
         client_cpu={:.2} latency_rate={:.0} p50_us={:.1} p99_us={:.1} p999_us={:.1} max_us={:.1} \
         lost={} gaps={gaps} out_of_order={backwards} receiver_mismatch={mismatch} \
         delivered_total={} publisher_worker={} latency_client_cpu={:.2}",
        o.published_per_s,
        o.delivered_per_s,
        o.client_cpu.unwrap_or(-1.0),
        if o.latency_secs > 0.0 {
            o.latency_sent as f64 / o.latency_secs
        } else {
            0.0
        },
        us(0.5),
        us(0.99),
        us(0.999),
        h.max() as f64 / 1000.0,
        o.lost,
        shared.total_received(),
        pub_worker.map_or("-".to_string(), |w| w.to_string()),
        o.latency_client_cpu.unwrap_or(-1.0)
    );
    Ok(())
}

/// Runs the throughput then the latency phase, waiting after each until
/// every subscriber has every message.
async fn run_phases(b: &PubsubBench, p: &mut Publisher<'_>, shared: &Shared) -> Result<Outcome> {
    let nn = shared.received.len() as u64;
    let mut o = Outcome {
        published_per_s: 0.0,
        delivered_per_s: 0.0,
        client_cpu: None,
        latency_client_cpu: None,
        latency_sent: 0,
        latency_secs: 0.0,
        drained: true,
        lost: 0,
    };
    let drain = |sent: u64| {
        shared.wait_for(move |s| s.min_received() >= sent && s.replied.load(Relaxed) >= sent)
    };
    if b.seconds > 0.0 || b.messages.is_some() {
        if b.warmup > 0.0 {
            let end = Instant::now() + Duration::from_secs_f64(b.warmup);
            p.phase(WARMUP, Until::Time(end), 0).await?;
        }
        let (t0, sent0, got0, cpu0) = (
            Instant::now(),
            p.sent,
            shared.total_received(),
            thread_cpu(),
        );
        let (t1, sent1, got1) = match b.messages {
            Some(m) => {
                p.phase(THROUGHPUT, Until::Count(m), 0).await?;
                let want = got0 + m * nn;
                shared.wait_for(|s| s.total_received() >= want).await?;
                (Instant::now(), p.sent, shared.total_received())
            }
            None => {
                let end = t0 + Duration::from_secs_f64(b.seconds);
                p.phase(THROUGHPUT, Until::Time(end), 0).await?;
                (Instant::now(), p.sent, shared.total_received())
            }
        };
        let secs = (t1 - t0).as_secs_f64();
        o.published_per_s = (sent1 - sent0) as f64 / secs;
        o.delivered_per_s = (got1 - got0) as f64 / secs;
        o.client_cpu = cpu0
            .zip(thread_cpu())
            .map(|(a, z)| (z - a).as_secs_f64() / secs);
        o.drained = drain(p.sent).await?;
    }
    if b.latency_seconds > 0.0 && o.drained {
        let (t0, cpu0) = (Instant::now(), thread_cpu());
        let end = t0 + Duration::from_secs_f64(b.latency_seconds);
        o.latency_sent = p.phase(LATENCY, Until::Time(end), b.rate).await?;
        o.latency_secs = (Instant::now() - t0).as_secs_f64();
        o.latency_client_cpu = cpu0
            .zip(thread_cpu())
            .map(|(a, z)| (z - a).as_secs_f64() / o.latency_secs);
        o.drained = drain(p.sent).await?;
    }
    o.lost = (p.sent * nn).saturating_sub(shared.total_received());
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_frame_parses_and_waits_for_the_rest() {
        let msg = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n:1\r\n";
        let (f, used) = parse_frame(msg).unwrap().unwrap();
        assert!(f.array);
        assert_eq!(
            f.items(),
            &[
                Item::Bulk(Some(b"message")),
                Item::Bulk(Some(b"ch")),
                Item::Bulk(Some(b"hello"))
            ]
        );
        assert_eq!(&msg[used..], b":1\r\n");
        for cut in 0..used {
            assert!(parse_frame(&msg[..cut]).unwrap().is_none(), "cut at {cut}");
        }
    }

    #[test]
    fn scalars_and_errors() {
        let (f, _) = parse_frame(b":-3\r\n").unwrap().unwrap();
        assert_eq!(f.items(), &[Item::Int(-3)]);
        assert!(!f.array);
        let (f, _) = parse_frame(b"-ERR unknown command\r\n").unwrap().unwrap();
        assert_eq!(f.describe(), "(error) ERR unknown command");
        let (f, _) = parse_frame(b"$-1\r\n").unwrap().unwrap();
        assert_eq!(f.items(), &[Item::Bulk(None)]);
        let (f, used) = parse_frame(b"*-1\r\n").unwrap().unwrap();
        assert_eq!((f.array, f.len, used), (true, 0, 5));
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        for bad in [
            &b"*1\r\n*1\r\n:1\r\n"[..],
            b"*9\r\n",
            b":x\r\n",
            b"$3\r\nabcde\r\n",
            b"?\r\n",
            b"+ok\n",
            b"\n",
            b"$99999999999999999999\r\n",
        ] {
            assert!(
                parse_frame(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn payload_header_round_trips() {
        let mut b = [0u8; 16];
        put_hex(&mut b, 0x0123_4567_89ab_cdef);
        assert_eq!(&b, b"0123456789abcdef");
        assert_eq!(hex(&b), Some(0x0123_4567_89ab_cdef));
        assert_eq!(hex(b"00000000000000zz"), None);
    }
}
