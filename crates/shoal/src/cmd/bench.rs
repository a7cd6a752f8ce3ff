//! `shoal bench store`: the embedded store against `std::collections::HashMap`
//! in the same run (one thread), then two processes on the same segment, and
//! the memory each key costs; `shoal bench pubsub` (its own module,
//! `bench_pubsub`): a pub/sub load generator for any RESP server; `shoal
//! bench skew` (`bench_skew`): how in step client processes start. All print
//! figures and assert nothing.

use std::collections::HashMap;
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use store::{Handle, Location, OpenOptions, SetOptions, Store};

/// Arguments of `shoal bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// GET and SET through the embedded API, with HashMap as the yardstick.
    Store(StoreBench),
    /// One publisher and N subscribers on a RESP server: delivered
    /// messages/s, then publish-to-receive latency.
    Pubsub(super::bench_pubsub::PubsubBench),
    /// How in step K client processes start: spinning to a shared
    /// CLOCK_MONOTONIC instant against a "go" sent to each.
    Skew(super::bench_skew::SkewBench),
}

#[derive(Args)]
struct StoreBench {
    /// Number of keys (16-byte keys, 16-byte values).
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Segment size.
    #[arg(long, default_value = "128m")]
    memory: String,
    /// Best of this many runs per figure (the machine is shared and noisy).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// Skip the two-process run (e.g. under a profiler).
    #[arg(long)]
    one_process: bool,
    /// Internal: run as one of the two worker processes (get|set).
    #[arg(long, hide = true)]
    child: Option<String>,
    /// Internal: the segment the worker attaches.
    #[arg(long, hide = true)]
    segment_path: Option<PathBuf>,
    /// Internal: the worker's index (0 or 1).
    #[arg(long, hide = true, default_value_t = 0)]
    child_index: u64,
}

/// Runs `shoal bench ...`.
pub fn run(args: BenchArgs) -> Result<()> {
    match args.what {
        What::Store(b) => match b.child.clone() {
            Some(role) => store_child(&b, &role),
            None => store_bench(&b),
        },
        What::Pubsub(b) => super::bench_pubsub::run(&b),
        What::Skew(b) => super::bench_skew::run(&b),
    }
}

/// How far ahead the prefetching GET run hashes and prefetches.
const PREFETCH_DISTANCE: usize = 8;

fn key(i: u64) -> [u8; 16] {
    let mut k = *b"key:000000000000";
    write_digits(&mut k[4..], i);
    k
}

fn value(i: u64, round: u64) -> [u8; 16] {
    let mut v = *b"val:000000000000";
    write_digits(&mut v[4..], i.wrapping_mul(7).wrapping_add(round));
    v
}

fn write_digits(out: &mut [u8], mut n: u64) {
    for b in out.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// A shuffled 0..n (xorshift Fisher-Yates), so lookups do not walk memory in
/// insertion order.
fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// Best rate of `runs` runs of `f`, which performs `ops` operations.
fn best_rate(runs: u32, ops: u64, mut f: impl FnMut(u32) -> Result<()>) -> Result<f64> {
    let mut best = 0f64;
    for r in 0..runs.max(1) {
        let t = Instant::now();
        f(r)?;
        best = best.max(ops as f64 / t.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn bench_segment_path() -> PathBuf {
    Path::new("/dev/shm").join(format!("shoal-bench-{}", std::process::id()))
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = engine::remove_side_files(&self.0);
    }
}

fn store_bench(b: &StoreBench) -> Result<()> {
    let n = b.keys;
    let size = store::parse_size(&b.memory).context("bad --memory")?;
    let path = bench_segment_path();
    let _cleanup = RemoveOnDrop(path.clone());
    let st = Store::open(&OpenOptions {
        location: Location::Path(path.clone()),
        size,
        ..OpenOptions::default()
    })?;
    let mut h = st.handle()?;
    let order = shuffled(n, 0x5EED);
    let opts = SetOptions::default();
    let mut buf = Vec::with_capacity(64);

    println!(
        "shoal bench store: {n} keys, 16-byte keys and values, one thread, best of {}",
        b.runs
    );
    // Inserts: the first run inserts, later runs start from an empty store.
    let store_insert = best_rate(b.runs, n, |_| {
        h.flushall()?;
        for &i in &order {
            h.set(0, &key(i), &value(i, 0), &opts)?;
        }
        Ok(())
    })?;
    let info = st.info()?;
    let store_get = best_rate(b.runs, n, |_| {
        for &i in &order {
            black_box(h.get_into(0, &key(i), &mut buf)?);
        }
        Ok(())
    })?;
    // As a pipeline would run: hash and prefetch the bucket of the key eight
    // ahead while looking up this one (Rai's batch prefetch).
    let store_get_prefetch = best_rate(b.runs, n, |_| {
        for (j, &i) in order.iter().enumerate() {
            if let Some(&ahead) = order.get(j + PREFETCH_DISTANCE) {
                h.prefetch(0, &key(ahead));
            }
            black_box(h.get_into(0, &key(i), &mut buf)?);
        }
        Ok(())
    })?;
    let store_set = best_rate(b.runs, n, |r| {
        for &i in &order {
            h.set(0, &key(i), &value(i, r as u64 + 1), &opts)?;
        }
        Ok(())
    })?;

    let mut map: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let map_insert = best_rate(b.runs, n, |_| {
        map = HashMap::new();
        for &i in &order {
            map.insert(key(i).to_vec(), value(i, 0).to_vec());
        }
        Ok(())
    })?;
    let map_get = best_rate(b.runs, n, |_| {
        for &i in &order {
            buf.clear();
            if let Some(v) = map.get(&key(i)[..]) {
                buf.extend_from_slice(v);
            }
            black_box(&buf);
        }
        Ok(())
    })?;
    let map_set = best_rate(b.runs, n, |r| {
        for &i in &order {
            map.insert(key(i).to_vec(), value(i, r as u64 + 1).to_vec());
        }
        Ok(())
    })?;
    drop(map);

    println!();
    println!(
        "{:<24}{:>16}{:>16}{:>10}",
        "operation", "shoal ops/s", "HashMap ops/s", "ratio"
    );
    for (name, s, m) in [
        ("SET (insert)", store_insert, map_insert),
        ("SET (overwrite)", store_set, map_set),
        ("GET (hit)", store_get, map_get),
        ("GET (prefetch 8 ahead)", store_get_prefetch, map_get),
    ] {
        println!("{name:<24}{s:>16.0}{m:>16.0}{:>10.2}", s / m);
    }

    let a = info.arena;
    let arena_per_key = a.used_bytes as f64 / n as f64;
    let index_per_key = (info.buckets * 64) as f64 / n as f64;
    println!();
    println!(
        "memory after {n} inserts ({} segment, {} index buckets):",
        b.memory, info.buckets
    );
    println!("  arena bytes used per key:            {arena_per_key:.1} (key + value = 32)");
    println!("  index table bytes per key:           {index_per_key:.1}");
    println!(
        "  overhead per key beyond key + value: {:.1} B",
        arena_per_key + index_per_key - 32.0
    );
    drop(h);

    if !b.one_process {
        two_processes(b, &path)?;
    }
    Ok(())
}

/// Two worker processes (pinned to core 0 and 1 when `taskset` exists) run
/// the same workload on the segment at once; prints each one's rate.
fn two_processes(b: &StoreBench, path: &Path) -> Result<()> {
    let exe = std::env::current_exe()?;
    let have_taskset = Command::new("taskset").arg("-V").output().is_ok();
    println!();
    println!(
        "two processes on one segment, started together{}:",
        if have_taskset {
            ", pinned to cores 0 and 1"
        } else {
            ""
        }
    );
    for role in ["get", "set"] {
        let mut kids = Vec::new();
        for idx in 0..2u64 {
            let mut cmd = if have_taskset {
                let mut c = Command::new("taskset");
                c.args(["-c", &idx.to_string()]).arg(&exe);
                c
            } else {
                Command::new(&exe)
            };
            cmd.args([
                "bench",
                "store",
                "--child",
                role,
                "--keys",
                &b.keys.to_string(),
            ])
            .arg("--runs")
            .arg(b.runs.to_string())
            .arg("--segment-path")
            .arg(path)
            .args(["--child-index", &idx.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
            let mut child = cmd.spawn().context("spawn bench worker")?;
            let mut out = BufReader::new(child.stdout.take().context("worker stdout")?);
            let mut line = String::new();
            out.read_line(&mut line)?;
            if line.trim() != "ready" {
                bail!("bench worker said {line:?}");
            }
            kids.push((child, out));
        }
        // Both start at one CLOCK_MONOTONIC instant (as `ctl exec` does),
        // not one after the other as each reads its "go".
        let start = server::simultaneous::monotonic_ns() + 20_000_000;
        for (child, _) in &mut kids {
            writeln!(child.stdin.as_mut().context("worker stdin")?, "go {start}")?;
        }
        let mut rates = Vec::new();
        for (mut child, mut out) in kids {
            let mut line = String::new();
            out.read_line(&mut line)?;
            rates.push(
                line.trim()
                    .parse::<f64>()
                    .with_context(|| format!("worker said {line:?}"))?,
            );
            child.wait()?;
        }
        let total: f64 = rates.iter().sum();
        println!(
            "  {:<4} process 0: {:>12.0} ops/s   process 1: {:>12.0} ops/s   together: {:>12.0} ops/s",
            role.to_uppercase(),
            rates[0],
            rates[1],
            total
        );
    }
    Ok(())
}

fn store_child(b: &StoreBench, role: &str) -> Result<()> {
    let path = b.segment_path.clone().context("--segment-path")?;
    let st = Store::open(&OpenOptions {
        location: Location::Path(path),
        create: false,
        ..OpenOptions::default()
    })?;
    let mut h: Handle = st.handle()?;
    let n = b.keys;
    let order = shuffled(n, 0xC0FFEE + b.child_index);
    let mut buf = Vec::with_capacity(64);
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    if let Some(start) = go.trim().strip_prefix("go ").and_then(|t| t.parse().ok()) {
        server::simultaneous::spin_until(start);
    }
    let opts = SetOptions::default();
    let rate = match role {
        "get" => best_rate(b.runs, n, |_| {
            for &i in &order {
                black_box(h.get_into(0, &key(i), &mut buf)?);
            }
            Ok(())
        })?,
        "set" => {
            // Each process overwrites its own half of the keys.
            let mine: Vec<u64> = order
                .iter()
                .copied()
                .filter(|i| i % 2 == b.child_index)
                .collect();
            best_rate(b.runs, mine.len() as u64, |r| {
                for &i in &mine {
                    h.set(0, &key(i), &value(i, 100 + r as u64), &opts)?;
                }
                Ok(())
            })?
        }
        other => bail!("unknown bench role {other}"),
    };
    println!("{rate:.0}");
    Ok(())
}
