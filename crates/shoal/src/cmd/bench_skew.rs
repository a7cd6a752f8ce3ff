//! `shoal bench skew`: how in step K client processes start, the way
//! `shoal bench` and `shoal ctl exec` start theirs. Prints figures; asserts
//! nothing.
//!
//! The clients are already running (re-execs of this binary, blocked on a
//! line of their stdin) before each run, so process start-up is not measured.
//! Two methods, alternated run by run so that noise from other work on the
//! machine falls on both:
//!
//! - spin: the parent picks a target instant 50 ms ahead on
//!   `CLOCK_MONOTONIC` (one clock for every process on the machine) and sends
//!   it to every client; each sleeps, then spins until the clock reaches it
//!   ([`server::simultaneous::spin_until`]) and reports the clock as read;
//! - naive: the parent writes "go" to every client at once and each reports
//!   the clock as read when the line arrives, as a "send now" broadcast would
//!   start them.
//!
//! Per run, skew = latest start - earliest start. The table gives its
//! average, maximum and standard deviation over the runs in microseconds, as
//! in the kdb+ "simultaneous execution" study. With `--server PORT` every
//! client also sends one PING right after it starts (a load client's first
//! request) and the table gets a row for the spread of the PING replies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use server::simultaneous::{monotonic_ns, spin_until};

/// Arguments of `shoal bench skew`.
#[derive(Args)]
pub struct SkewBench {
    /// Number of client processes started together.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Runs of each method.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// spin: how far ahead of the broadcast the start instant lies, in ms.
    #[arg(long, default_value_t = 50)]
    at_ms: u64,
    /// Each client sends one PING to this RESP port right after it starts.
    #[arg(long)]
    server: Option<u16>,
    /// The server's address (with --server).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Leave the clients where the scheduler puts them. By default each is
    /// pinned to a CPU of its own (taskset) when there are enough: two
    /// spinners woken on one CPU would take turns, and the second would
    /// start a scheduler tick late.
    #[arg(long)]
    no_pin: bool,
    /// Also print every run's skew, not only the summary.
    #[arg(long)]
    each: bool,
    /// Print the figures as one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Internal: run as one client process.
    #[arg(long, hide = true)]
    child: bool,
}

/// Runs `shoal bench skew`.
pub fn run(b: &SkewBench) -> Result<()> {
    if b.child {
        return child(b);
    }
    if b.clients < 2 {
        bail!("--clients must be at least 2 (skew is between clients)");
    }
    if b.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = !b.no_pin && b.clients <= cpus && Command::new("taskset").arg("-V").output().is_ok();
    let mut clients = (0..b.clients)
        .map(|i| Client::spawn(b, pin.then_some(i)))
        .collect::<Result<Vec<_>>>()?;
    let mut spin = Figures::default();
    let mut naive = Figures::default();
    for _ in 0..b.runs {
        // A pause so every client is back in its blocking read.
        std::thread::sleep(Duration::from_millis(20));
        let target = monotonic_ns() + b.at_ms * 1_000_000;
        let order = format!("spin {target}\n");
        for c in &mut clients {
            c.stdin.write_all(order.as_bytes())?;
            c.stdin.flush()?;
        }
        spin.add(&collect(&mut clients)?);
        std::thread::sleep(Duration::from_millis(20));
        for c in &mut clients {
            c.stdin.write_all(b"go\n")?;
            c.stdin.flush()?;
        }
        naive.add(&collect(&mut clients)?);
        if b.each && !b.json {
            println!(
                "run {:>3}: spin {:>10.2} us   naive {:>10.2} us",
                spin.start.len(),
                spin.start.last().unwrap_or(&0.0),
                naive.start.last().unwrap_or(&0.0)
            );
        }
    }
    for mut c in clients {
        drop(c.stdin);
        c.process.wait()?;
    }
    let rows = [
        ("spin", &spin.start),
        ("naive", &naive.start),
        ("spin, PING replied", &spin.ping),
        ("naive, PING replied", &naive.ping),
    ];
    if b.json {
        let cells: Vec<String> = rows
            .iter()
            .filter(|(_, skews)| !skews.is_empty())
            .map(|(name, skews)| {
                let s = Stats::of(skews);
                format!(
                    "{{\"method\":\"{name}\",\"runs\":{},\"avg_us\":{:.3},\"median_us\":{:.3},\"max_us\":{:.3},\"stddev_us\":{:.3}}}",
                    skews.len(),
                    s.avg,
                    s.median,
                    s.max,
                    s.stddev
                )
            })
            .collect();
        println!(
            "{{\"clients\":{},\"runs\":{},\"pinned\":{pin},\"rows\":[{}]}}",
            b.clients,
            b.runs,
            cells.join(",")
        );
        return Ok(());
    }
    println!(
        "shoal bench skew: {} client processes{}, {} runs per method; skew = latest start - earliest start",
        b.clients,
        if pin { " (each pinned to a CPU)" } else { "" },
        b.runs
    );
    println!();
    println!(
        "{:<22}{:>12}{:>12}{:>12}{:>14}",
        "method", "avg us", "median us", "max us", "stddev us"
    );
    for (name, skews) in rows {
        if skews.is_empty() {
            continue;
        }
        let s = Stats::of(skews);
        println!(
            "{name:<22}{:>12.2}{:>12.2}{:>12.2}{:>14.2}",
            s.avg, s.median, s.max, s.stddev
        );
    }
    Ok(())
}

/// One client process: its stdin takes orders, its stdout gives clock reads.
struct Client {
    process: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    /// Starts one client, pinned to CPU `cpu` when given.
    fn spawn(b: &SkewBench, cpu: Option<usize>) -> Result<Client> {
        let exe = std::env::current_exe()?;
        let mut cmd = match cpu {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu.to_string()]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args(["bench", "skew", "--child"]);
        if let Some(port) = b.server {
            cmd.args(["--server", &port.to_string(), "--host", &b.host]);
        }
        let mut process = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("spawn bench client")?;
        let stdin = process.stdin.take().context("client stdin")?;
        let mut stdout = BufReader::new(process.stdout.take().context("client stdout")?);
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("bench client said {line:?}");
        }
        Ok(Client {
            process,
            stdin,
            stdout,
        })
    }
}

/// One run's report from every client: (start, PING reply time if any).
fn collect(clients: &mut [Client]) -> Result<Vec<(u64, Option<u64>)>> {
    let mut out = Vec::with_capacity(clients.len());
    for c in clients {
        let mut line = String::new();
        c.stdout.read_line(&mut line)?;
        let mut fields = line.split_whitespace().map(str::parse::<u64>);
        let start = fields
            .next()
            .with_context(|| format!("client said {line:?}"))??;
        let ping = fields.next().transpose()?;
        out.push((start, ping));
    }
    Ok(out)
}

/// Per-run skews in microseconds, of the starts and of the PING replies.
#[derive(Default)]
struct Figures {
    start: Vec<f64>,
    ping: Vec<f64>,
}

impl Figures {
    fn add(&mut self, run: &[(u64, Option<u64>)]) {
        self.start.push(spread_us(run.iter().map(|r| r.0)));
        let pings: Vec<u64> = run.iter().filter_map(|r| r.1).collect();
        if pings.len() == run.len() {
            self.ping.push(spread_us(pings.into_iter()));
        }
    }
}

fn spread_us(clock: impl Iterator<Item = u64> + Clone) -> f64 {
    let max = clock.clone().max().unwrap_or(0);
    let min = clock.min().unwrap_or(0);
    (max - min) as f64 / 1000.0
}

struct Stats {
    avg: f64,
    median: f64,
    max: f64,
    stddev: f64,
}

impl Stats {
    /// Mean, median, maximum and sample standard deviation. The median
    /// shows what most runs got when a few runs were preempted.
    fn of(v: &[f64]) -> Stats {
        let n = v.len() as f64;
        let mut sorted = v.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        let avg = v.iter().sum::<f64>() / n;
        let max = v.iter().copied().fold(0.0, f64::max);
        let var = if v.len() > 1 {
            v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Stats {
            avg,
            median,
            max,
            stddev: var.sqrt(),
        }
    }
}

/// A client process: reads orders until stdin closes; for each prints its
/// start (and, with a server, when the PING reply arrived) on one line.
fn child(b: &SkewBench) -> Result<()> {
    let mut conn = match b.server {
        Some(port) => {
            let s = TcpStream::connect((b.host.as_str(), port))
                .with_context(|| format!("connect to {}:{port}", b.host))?;
            s.set_nodelay(true)?;
            Some(s)
        }
        None => None,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut stdin = std::io::stdin().lock();
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let start = match line.trim().split_once(' ') {
            Some(("spin", target)) => spin_until(target.parse().context("spin target")?),
            _ => monotonic_ns(),
        };
        match conn.as_mut() {
            Some(s) => {
                ping(s)?;
                writeln!(out, "{start} {}", monotonic_ns())?;
            }
            None => writeln!(out, "{start}")?,
        }
        out.flush()?;
    }
}

/// One PING and its "+PONG\r\n".
fn ping(s: &mut TcpStream) -> Result<()> {
    s.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut reply = [0u8; 7];
    s.read_exact(&mut reply)?;
    if &reply != b"+PONG\r\n" {
        bail!("PING answered {:?}", String::from_utf8_lossy(&reply));
    }
    Ok(())
}
