//! An engine on a private temporary segment with a manual clock, and a helper
//! that runs one command and returns its reply as text (RESP bytes, lossy).
#![allow(dead_code)]

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use engine::{Config, Engine, Flow, ServerInfo, ServerRequest, Session};
use proto::resp::Protocol;
use store::{Clock, Location, OpenOptions, Store};

/// Start of the manual clock: 2026-01-01T00:00:00Z in ms.
pub const T0: u64 = 1_767_225_600_000;

pub struct TestEngine {
    pub engine: Engine,
    pub session: Session,
    pub clock: Arc<AtomicU64>,
    path: PathBuf,
}

impl TestEngine {
    pub fn new() -> TestEngine {
        Self::with_size(16 << 20)
    }

    pub fn with_size(size: u64) -> TestEngine {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "shoal-engine-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        let clock = Arc::new(AtomicU64::new(T0));
        let store = Store::open(&OpenOptions {
            location: Location::Path(path.clone()),
            size,
            clock: Clock::Manual(clock.clone()),
            ..OpenOptions::default()
        })
        .expect("temp segment");
        let engine = Engine::new(store, Config::default(), ServerInfo::default()).expect("engine");
        let session = Session::new(1, T0);
        TestEngine {
            engine,
            session,
            clock,
            path,
        }
    }

    /// Runs one command given as words; returns the reply bytes as text.
    pub fn run(&mut self, words: &[&str]) -> String {
        let args: Vec<Cow<[u8]>> = words.iter().map(|w| Cow::Borrowed(w.as_bytes())).collect();
        self.run_bytes(&args).0
    }

    /// Runs one command with binary arguments; returns the reply and the flow.
    pub fn run_bytes(&mut self, args: &[Cow<[u8]>]) -> (String, Flow) {
        let mut out = Vec::new();
        self.engine.begin_batch(&mut self.session);
        let mut flow = self.engine.execute(&mut self.session, args, &mut out);
        // A diagnostics query goes to every worker; here there is one.
        if let Flow::Server(ServerRequest::Gather(query)) = &flow {
            let answer = self.engine.answer_gather(query);
            let protocol = self.session.protocol;
            self.engine
                .finish_gather(query, &[answer], protocol, &mut out);
            flow = Flow::Continue;
        }
        self.engine.end_batch();
        (String::from_utf8_lossy(&out).into_owned(), flow)
    }

    /// Switches the session to RESP3.
    pub fn resp3(&mut self) {
        self.session.protocol = Protocol::Resp3;
    }

    /// Moves the manual clock forward.
    pub fn advance_ms(&self, ms: u64) {
        self.clock.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn now_ms(&self) -> u64 {
        self.clock.load(Ordering::SeqCst)
    }
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `+OK\r\n`.
pub const OK: &str = "+OK\r\n";
/// The RESP2 null bulk.
pub const NIL: &str = "$-1\r\n";

/// `:n\r\n`.
pub fn int(n: i64) -> String {
    format!(":{n}\r\n")
}

/// `$len\r\ntext\r\n`.
pub fn bulk(text: &str) -> String {
    format!("${}\r\n{text}\r\n", text.len())
}

/// `-text\r\n`.
pub fn err(text: &str) -> String {
    format!("-{text}\r\n")
}

/// A RESP2 array of bulk strings.
pub fn bulks(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        s.push_str(&bulk(i));
    }
    s
}
