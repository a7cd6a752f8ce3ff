//! The `shoal` command: parses flags and hands over to one subcommand module.
#![forbid(unsafe_code)]

mod cmd;

use clap::{Parser, Subcommand};

/// shoal: a shared-memory data server for low-latency caching and distribution.
#[derive(Parser)]
#[command(name = "shoal", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: a supervisor and its worker processes.
    Serve(Box<cmd::serve::ServeArgs>),
    /// One worker process (started by `shoal serve`).
    #[command(hide = true)]
    Worker(cmd::serve::WorkerArgs),
    /// Inspect or create a shared-memory segment.
    Store(cmd::store::StoreArgs),
    /// Load generators and comparison runs.
    Bench(cmd::bench::BenchArgs),
    /// Operations on a running server.
    Ctl(cmd::ctl::CtlArgs),
    /// Check, repair or print a transaction log file.
    Log(cmd::log::LogArgs),
    /// Check or print a snapshot file.
    Snapshot(cmd::log::SnapshotArgs),
}

/// Exits with a checker's code (1 = the file is not whole).
fn exit_with(code: anyhow::Result<i32>) -> anyhow::Result<()> {
    let code = code?;
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

fn main() {
    // `shoal serve` also takes redis-server's command line, which clap
    // cannot describe: Redis's options are taken out first.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let serve_line = (args.get(1).map(String::as_str) == Some("serve"))
        .then(|| cmd::redis_start::split_args(&args));
    let cli = match &serve_line {
        Some(line) => Cli::parse_from(&line.clap_args),
        None => Cli::parse(),
    };
    let result = match cli.command {
        Command::Serve(args) => cmd::serve::run(*args, serve_line.unwrap_or_default()),
        Command::Worker(args) => cmd::serve::run_worker(args),
        Command::Store(args) => cmd::store::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Ctl(args) => cmd::ctl::run(args),
        Command::Log(args) => exit_with(cmd::log::run(args)),
        Command::Snapshot(args) => exit_with(cmd::log::run_snapshot(args)),
    };
    if let Err(e) = result {
        eprintln!("shoal: {e:#}");
        std::process::exit(1);
    }
}
