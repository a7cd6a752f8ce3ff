//! The harness the end-to-end tests share: a real `shoal serve` on free
//! ports with a private segment, stopped with SIGTERM (and its segment and
//! the files beside it removed) when dropped, even when a check fails.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running `shoal serve`.
pub struct Server {
    child: Child,
    pub port: u16,
    /// The NATS port, when the server was started with one.
    pub nats_port: Option<u16>,
    pub name: String,
}

impl Server {
    /// `workers` workers serving only RESP (other protocols' default ports
    /// would be shared between tests).
    pub fn start(workers: u32) -> Server {
        Server::launch(workers, false)
    }

    /// RESP and NATS.
    pub fn start_with_nats(workers: u32) -> Server {
        Server::launch(workers, true)
    }

    fn launch(workers: u32, nats: bool) -> Server {
        let port = free_port();
        let nats_port = nats.then(free_port);
        let name = format!("shoal-rs-test-{}-{port}", std::process::id());
        let mut child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(["serve", "--workers", &workers.to_string(), "--port"])
            .arg(port.to_string())
            .args(["--name", &name, "--memory", "32m"])
            .args(["--memcached-port", "0", "--memcached-udp-port", "0"])
            .args(["--http-port", "0", "--nats-port"])
            .arg(nats_port.unwrap_or(0).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start shoal serve");
        let stdout = child.stdout.take().expect("stdout");
        let server = Server {
            child,
            port,
            nats_port,
            name,
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("shoal ready") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("shoal serve printed no ready line");
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..150 {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(["store", "remove", "--name", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_file(format!("/dev/shm/{}", self.name));
    }
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}
