//! `shoal store info|check|create|remove`: look at a segment from the outside.

use ::store::Store;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use super::SegmentArgs;

/// Arguments of `shoal store`.
#[derive(Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    action: Action,
    #[command(flatten)]
    segment: SegmentArgs,
}

#[derive(Subcommand)]
enum Action {
    /// Create the segment if missing and print its figures.
    Create,
    /// Print the segment's geometry, memory, keys per db and counters.
    Info,
    /// Recover dead contexts, then verify every invariant (run with no writers).
    Check,
    /// Delete the segment file (and the script cache and function
    /// libraries kept beside it).
    Remove,
}

/// Runs `shoal store ...`.
pub fn run(args: StoreArgs) -> Result<()> {
    let opts = args
        .segment
        .options(matches!(args.action, Action::Create))?;
    if let Action::Remove = args.action {
        let path = opts.location.file_path();
        std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
        // The script cache and function libraries kept beside it go too.
        engine::remove_side_files(&path)
            .with_context(|| format!("remove the scripting files beside {}", path.display()))?;
        println!("removed {}", path.display());
        return Ok(());
    }
    let store = Store::open(&opts)?;
    match args.action {
        Action::Create | Action::Info => print_info(&store),
        Action::Check => {
            let recovered = store.handle().map(drop);
            recovered?;
            let report = store.check()?;
            println!(
                "ok: {} keys, {} overflow nodes, {} used blocks, {} free blocks",
                report.keys, report.nodes, report.used_blocks, report.free_blocks
            );
            Ok(())
        }
        Action::Remove => unreachable!("handled above"),
    }
}

fn print_info(store: &Store) -> Result<()> {
    let info = store.info()?;
    let a = info.arena;
    println!("# segment");
    println!("path:{}", info.path);
    println!("segment_bytes:{}", info.segment_bytes);
    println!("page_bytes:{}", info.page_bytes);
    println!("layout_version:{}", ::store::LAYOUT_VERSION);
    println!("index_buckets:{}", info.buckets);
    println!("contexts:{}", info.contexts);
    println!("contexts_attached:{}", info.contexts_attached);
    println!("# memory");
    println!("arena_bytes:{}", a.total_bytes);
    println!("used_bytes:{}", a.used_bytes);
    println!("free_bytes:{}", a.free_bytes);
    println!("used_blocks:{}", a.used_blocks);
    println!("free_blocks:{}", a.free_blocks);
    println!("largest_free_block:{}", a.largest_free);
    println!("stashed_bytes:{}", a.stashed_bytes);
    println!("fragmentation:{:.4}", a.fragmentation());
    println!("maxmemory:{}", info.maxmemory);
    println!("maxmemory_policy:{}", info.policy.name());
    println!("# stats");
    for (name, value) in &info.stats {
        println!("{name}:{value}");
    }
    println!("# keyspace");
    for (db, (keys, expires)) in info.keyspace.iter().enumerate() {
        if *keys > 0 {
            println!("db{db}:keys={keys},expires={expires}");
        }
    }
    Ok(())
}
