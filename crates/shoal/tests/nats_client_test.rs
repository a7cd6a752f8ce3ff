//! The NATS front end through the official Rust client (`async-nats`),
//! against a real `shoal serve --workers 2`: subjects and wildcards, a
//! queue group whose members sit on both workers, request/reply, headers,
//! and messages between NATS and Redis clients.

mod common;

use std::time::Duration;

use common::Server;
use futures::StreamExt;
use redis::Commands;

/// Connects through the crate; `tag` names the client.
async fn connect(server: &Server, tag: &str) -> async_nats::Client {
    let port = server.nats_port.expect("started with NATS");
    async_nats::ConnectOptions::new()
        .name(tag)
        .connect(format!("nats://127.0.0.1:{port}"))
        .await
        .expect("connect")
}

/// The next message, failing the test instead of hanging.
async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("a message within 10 s")
        .expect("subscription open")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn subjects_wildcards_and_redis_share_one_space() {
    let server = Server::start_with_nats(2);
    runtime().block_on(async {
        let nc = connect(&server, "sub").await;
        let mut exact = nc.subscribe("md.a").await.unwrap();
        let mut tail = nc.subscribe("md.>").await.unwrap();
        nc.flush().await.unwrap();
        let publisher = connect(&server, "pub").await;
        publisher.publish("md.a", "1".into()).await.unwrap();
        publisher.publish("md.b.c", "2".into()).await.unwrap();
        publisher.flush().await.unwrap();
        assert_eq!(next(&mut exact).await.payload.as_ref(), b"1");
        let got = [next(&mut tail).await, next(&mut tail).await];
        let subjects: Vec<&str> = got.iter().map(|m| m.subject.as_str()).collect();
        assert_eq!(subjects, ["md.a", "md.b.c"]);
        // A Redis PUBLISH reaches the NATS subscriber.
        let mut r = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port))
            .unwrap()
            .get_connection()
            .unwrap();
        let receivers: i64 = r.publish("md.a", "from-redis").unwrap();
        assert_eq!(receivers, 2);
        assert_eq!(next(&mut exact).await.payload.as_ref(), b"from-redis");
    });
}

#[test]
fn a_queue_group_across_workers_gets_each_message_once() {
    let server = Server::start_with_nats(2);
    runtime().block_on(async {
        // Several connections, so that members land on both workers.
        let mut clients = Vec::new();
        let mut members = Vec::new();
        for i in 0..6 {
            let nc = connect(&server, &format!("member{i}")).await;
            members.push(nc.queue_subscribe("work", "g".into()).await.unwrap());
            nc.flush().await.unwrap();
            clients.push(nc);
        }
        let publisher = connect(&server, "pub").await;
        for i in 0..120 {
            publisher
                .publish("work", i.to_string().into())
                .await
                .unwrap();
        }
        publisher.flush().await.unwrap();
        let mut got = Vec::new();
        while got.len() < 120 {
            let reads = members.iter_mut().map(|m| Box::pin(m.next()));
            let (msg, _, _) =
                tokio::time::timeout(Duration::from_secs(10), futures::future::select_all(reads))
                    .await
                    .expect("every message delivered");
            let msg = msg.expect("subscription open");
            got.push(
                String::from_utf8(msg.payload.to_vec())
                    .unwrap()
                    .parse::<u32>()
                    .unwrap(),
            );
        }
        got.sort_unstable();
        assert_eq!(got, (0..120).collect::<Vec<_>>(), "each message once");
        // Nothing more arrives at any member.
        for m in &mut members {
            assert!(tokio::time::timeout(Duration::from_millis(200), m.next())
                .await
                .is_err());
        }
    });
}

#[test]
fn request_reply_and_headers_between_clients() {
    let server = Server::start_with_nats(2);
    runtime().block_on(async {
        let responder = connect(&server, "responder").await;
        let mut requests = responder.subscribe("svc.echo").await.unwrap();
        responder.flush().await.unwrap();
        let serve = tokio::spawn(async move {
            let req = next(&mut requests).await;
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Shoal-Seen", req.payload.len().to_string().as_str());
            responder
                .publish_with_headers(req.reply.expect("a reply subject"), headers, req.payload)
                .await
                .unwrap();
            responder.flush().await.unwrap();
        });
        let requester = connect(&server, "requester").await;
        let reply = tokio::time::timeout(
            Duration::from_secs(10),
            requester.request("svc.echo", "ping".into()),
        )
        .await
        .expect("a reply within 10 s")
        .expect("a reply");
        assert_eq!(reply.payload.as_ref(), b"ping");
        let headers = reply.headers.expect("headers");
        assert_eq!(headers.get("Shoal-Seen").map(|v| v.as_str()), Some("4"));
        serve.await.unwrap();
        // No responder: the client hears so at once (no_responders).
        let err = requester
            .request("svc.nobody", "x".into())
            .await
            .expect_err("no responders");
        assert_eq!(err.kind(), async_nats::RequestErrorKind::NoResponders);
    });
}
