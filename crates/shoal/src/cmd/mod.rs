//! One module per subcommand.

pub mod bench;
pub mod bench_pubsub;
pub mod bench_skew;
pub mod ctl;
pub mod log;
pub mod redis_start;
pub mod serve;
pub mod store;

use std::path::PathBuf;

use ::store::{Location, OpenOptions};
use anyhow::{anyhow, Result};
use clap::Args;

/// Which segment to use: `--name` (POSIX shm) or `--segment PATH`.
#[derive(Args, Clone, Debug)]
pub struct SegmentArgs {
    /// Shared-memory name of the segment (a file under /dev/shm).
    #[arg(long, global = true, default_value = "shoal")]
    pub name: String,
    /// Path of the segment file, instead of a shared-memory name.
    #[arg(long, global = true)]
    pub segment: Option<PathBuf>,
    /// Segment size when it is created (64m, 1g, ...).
    #[arg(long, global = true, default_value = "1g")]
    pub memory: String,
}

impl SegmentArgs {
    /// Open options for this segment; `create` says whether a missing one is made.
    pub fn options(&self, create: bool) -> Result<OpenOptions> {
        let size = ::store::parse_size(&self.memory)
            .ok_or_else(|| anyhow!("bad size {:?}: use a number with k, m or g", self.memory))?;
        Ok(OpenOptions {
            location: match &self.segment {
                Some(p) => Location::Path(p.clone()),
                None => Location::Name(self.name.clone()),
            },
            size,
            create,
            ..OpenOptions::default()
        })
    }
}
