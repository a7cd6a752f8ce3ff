//! Server commands through the dispatcher: CONFIG's eviction parameters, with
//! Redis 7.0's exact replies and error texts.

mod common;

use common::*;

/// CONFIG GET of one parameter: its name and value as a RESP2 array.
fn pair(name: &str, value: &str) -> String {
    bulks(&[name, value])
}

/// Redis's CONFIG SET failure for `name`.
fn set_failed(name: &str, why: &str) -> String {
    err(&format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

#[test]
fn every_redis_eviction_policy_is_accepted() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["CONFIG", "GET", "maxmemory-policy"]),
        pair("maxmemory-policy", "noeviction")
    );
    for name in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "noeviction",
    ] {
        assert_eq!(t.run(&["CONFIG", "SET", "maxmemory-policy", name]), OK);
        assert_eq!(
            t.run(&["CONFIG", "GET", "maxmemory-policy"]),
            pair("maxmemory-policy", name)
        );
        let info = t.run(&["INFO", "memory"]);
        assert!(
            info.contains(&format!("maxmemory_policy:{name}\r\n")),
            "{info}"
        );
    }
    // Case does not matter; the reply is in Redis's spelling.
    assert_eq!(
        t.run(&["CONFIG", "SET", "maxmemory-policy", "Volatile-Random"]),
        OK
    );
    assert_eq!(
        t.run(&["CONFIG", "GET", "maxmemory-policy"]),
        pair("maxmemory-policy", "volatile-random")
    );
}

#[test]
fn unknown_eviction_policy_lists_redis_names_in_redis_order() {
    let mut t = TestEngine::new();
    for bad in ["lfu", "allkeys", "volatile-lfu-x", ""] {
        assert_eq!(
            t.run(&["CONFIG", "SET", "maxmemory-policy", bad]),
            set_failed(
                "maxmemory-policy",
                "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction"
            ),
            "{bad:?}"
        );
    }
    assert_eq!(
        t.run(&["CONFIG", "GET", "maxmemory-policy"]),
        pair("maxmemory-policy", "noeviction")
    );
}

#[test]
fn lfu_parameters_get_and_set() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["CONFIG", "GET", "lfu-log-factor"]),
        pair("lfu-log-factor", "10")
    );
    assert_eq!(
        t.run(&["CONFIG", "GET", "lfu-decay-time"]),
        pair("lfu-decay-time", "1")
    );
    // CONFIG GET lists parameters by name (Redis lists them in its hash
    // table's order, which changes from run to run).
    assert_eq!(
        t.run(&["CONFIG", "GET", "lfu-*"]),
        bulks(&["lfu-decay-time", "1", "lfu-log-factor", "10"])
    );
    assert_eq!(t.run(&["CONFIG", "SET", "lfu-log-factor", "0"]), OK);
    assert_eq!(
        t.run(&["CONFIG", "SET", "lfu-decay-time", "2147483647"]),
        OK
    );
    assert_eq!(
        t.run(&["CONFIG", "GET", "lfu-*"]),
        bulks(&["lfu-decay-time", "2147483647", "lfu-log-factor", "0"])
    );
    assert_eq!(t.engine.store().lfu_log_factor().unwrap(), 0);
    assert_eq!(t.engine.store().lfu_decay_time().unwrap(), 2147483647);
    // Both in one CONFIG SET.
    assert_eq!(
        t.run(&[
            "CONFIG",
            "SET",
            "lfu-log-factor",
            "100",
            "lfu-decay-time",
            "5"
        ]),
        OK
    );
    assert_eq!(
        t.run(&["CONFIG", "GET", "lfu-*"]),
        bulks(&["lfu-decay-time", "5", "lfu-log-factor", "100"])
    );
}

#[test]
fn lfu_parameters_are_checked_as_redis_does() {
    let mut t = TestEngine::new();
    let range = "argument must be between 0 and 2147483647 inclusive";
    let not_int = "argument couldn't be parsed into an integer";
    for name in ["lfu-log-factor", "lfu-decay-time"] {
        assert_eq!(
            t.run(&["CONFIG", "SET", name, "-1"]),
            set_failed(name, range)
        );
        assert_eq!(
            t.run(&["CONFIG", "SET", name, "2147483648"]),
            set_failed(name, range)
        );
        assert_eq!(
            t.run(&["CONFIG", "SET", name, "abc"]),
            set_failed(name, not_int)
        );
    }
    // A bad value changes nothing, not even the good ones beside it.
    assert_eq!(
        t.run(&[
            "CONFIG",
            "SET",
            "lfu-log-factor",
            "3",
            "lfu-decay-time",
            "-5"
        ]),
        set_failed("lfu-decay-time", range)
    );
    assert_eq!(
        t.run(&["CONFIG", "GET", "lfu-*"]),
        bulks(&["lfu-decay-time", "1", "lfu-log-factor", "10"])
    );
}
