//! Helpers shared by the store's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use store::{Clock, Location, OpenOptions, Store};

/// A segment file in the temp dir, removed on drop.
pub struct TempSegment {
    pub path: PathBuf,
}

impl TempSegment {
    pub fn new(tag: &str) -> TempSegment {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "shoal-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        TempSegment { path }
    }

    pub fn options(&self, size: u64) -> OpenOptions {
        OpenOptions {
            location: Location::Path(self.path.clone()),
            size,
            ..OpenOptions::default()
        }
    }

    pub fn open(&self, size: u64) -> Store {
        Store::open(&self.options(size)).expect("open segment")
    }

    /// Opens with a manual clock starting at `start_ms`.
    pub fn open_with_clock(&self, size: u64, start_ms: u64) -> (Store, Arc<AtomicU64>) {
        let clock = Arc::new(AtomicU64::new(start_ms));
        let mut opts = self.options(size);
        opts.clock = Clock::Manual(clock.clone());
        (Store::open(&opts).expect("open segment"), clock)
    }
}

impl Drop for TempSegment {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
