//! SLOWLOG, LATENCY, INFO's per-command sections, MEMORY, ROLE and MODULE
//! through the dispatcher (the test harness answers a gather for its one
//! engine, as the server does for every worker).

mod common;

use common::*;

#[test]
fn slowlog_records_trims_and_resets() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["SLOWLOG", "LEN"]), int(0));
    assert_eq!(
        t.run(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        OK
    );
    t.run(&["CLIENT", "SETNAME", "me"]);
    let long = "A".repeat(130);
    t.run(&["SET", "k", &long]);
    // SLOWLOG GET does not see itself: it joins the log after its reply.
    let got = t.run(&["SLOWLOG", "GET", "1"]);
    assert!(got.starts_with("*1\r\n*6\r\n"), "{got}");
    assert!(
        got.contains(&format!(
            "$3\r\nSET\r\n$1\r\nk\r\n$146\r\n{}... (2 more bytes)\r\n",
            "A".repeat(128)
        )),
        "{got}"
    );
    assert!(got.ends_with("$2\r\nme\r\n"), "{got}");
    let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let mut args = vec!["SADD", "s"];
    args.extend(many.iter().map(String::as_str));
    t.run(&args);
    let got = t.run(&["SLOWLOG", "GET", "1"]);
    assert!(got.contains("*32\r\n$4\r\nSADD\r\n"), "{got}");
    assert!(got.contains("$23\r\n... (11 more arguments)\r\n"), "{got}");
    assert_eq!(
        t.run(&["SLOWLOG", "GET", "-2"]),
        err("ERR count should be greater than or equal to -1")
    );
    assert_eq!(t.run(&["CONFIG", "SET", "slowlog-max-len", "2"]), OK);
    t.run(&["PING"]);
    t.run(&["PING"]);
    t.run(&["PING"]);
    assert_eq!(t.run(&["SLOWLOG", "LEN"]), int(2));
    assert_eq!(
        t.run(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        OK
    );
    assert_eq!(t.run(&["SLOWLOG", "RESET"]), OK);
    assert_eq!(t.run(&["SLOWLOG", "LEN"]), int(0));
}

#[test]
fn commandstats_count_calls_rejections_and_failures() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["CONFIG", "RESETSTAT"]), OK);
    t.run(&["SET", "a", "1"]);
    t.run(&["LPUSH", "a", "x"]);
    t.run(&["GET"]);
    let info = t.run(&["INFO", "commandstats"]);
    assert!(info.contains("cmdstat_set:calls=1,"), "{info}");
    assert!(
        info.contains("cmdstat_lpush:calls=1,") && info.contains("rejected_calls=0,failed_calls=1"),
        "{info}"
    );
    assert!(
        info.contains(
            "cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0"
        ),
        "{info}"
    );
    let errors = t.run(&["INFO", "errorstats"]);
    assert!(
        errors.contains("errorstat_ERR:count=1") && errors.contains("errorstat_WRONGTYPE:count=1"),
        "{errors}"
    );
    let histogram = t.run(&["LATENCY", "HISTOGRAM", "set", "nosuch"]);
    assert!(
        histogram
            .starts_with("*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n"),
        "{histogram}"
    );
    assert_eq!(t.run(&["CONFIG", "RESETSTAT"]), OK);
    assert!(!t.run(&["INFO", "commandstats"]).contains("cmdstat_set"));
    // INFO with no argument leaves the per-command sections out.
    let default = t.run(&["INFO"]);
    assert!(default.contains("# Errorstats") && default.contains("cluster_enabled:0"));
    assert!(!default.contains("# Commandstats"));
    assert!(t.run(&["INFO", "all"]).contains("# Latencystats"));
}

#[test]
fn latency_events_and_doctor() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["LATENCY", "LATEST"]), "*0\r\n");
    assert_eq!(t.run(&["LATENCY", "HISTORY", "command"]), "*0\r\n");
    assert!(t.run(&["LATENCY", "DOCTOR"]).contains("no latency spike"));
    assert_eq!(
        t.run(&["LATENCY", "GRAPH", "command"]),
        err("ERR No samples available for event 'command'")
    );
    assert_eq!(t.run(&["LATENCY", "RESET"]), int(0));
}

#[test]
fn memory_usage_role_and_module() {
    let mut t = TestEngine::new();
    assert_eq!(t.run(&["MEMORY", "USAGE", "nosuch"]), NIL);
    t.run(&["SET", "k", &"v".repeat(1000)]);
    let usage: i64 = t.run(&["MEMORY", "USAGE", "k"])[1..]
        .trim()
        .parse()
        .expect("int");
    assert!((1000..1200).contains(&usage), "{usage}");
    assert_eq!(
        t.run(&["MEMORY", "USAGE", "k", "SAMPLES", "-1"]),
        err("ERR syntax error")
    );
    assert!(t.run(&["MEMORY", "STATS"]).contains("keys.count"));
    assert_eq!(t.run(&["ROLE"]), "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    assert_eq!(t.run(&["MODULE", "LIST"]), "*0\r\n");
    assert!(t
        .run(&["MODULE", "LOAD", "/x.so"])
        .starts_with("-ERR MODULE command not allowed"));
}

#[test]
fn memory_usage_counts_a_paged_collections_nodes() {
    let mut t = TestEngine::new();
    let mut args: Vec<String> = vec!["RPUSH".into(), "l".into()];
    args.extend((0..5000).map(|i| format!("item-{i:06}")));
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    t.run(&words);
    let usage: i64 = t.run(&["MEMORY", "USAGE", "l"])[1..]
        .trim()
        .parse()
        .expect("int");
    // 5000 items of 11 bytes: at least their bytes, well under ten times.
    assert!((55_000..550_000).contains(&usage), "{usage}");
}
