//! Geo commands through the dispatcher, against replies recorded from
//! redis-server 7.0.15 (`tests/unit/geo.tcl` and by hand): scores, search
//! results and their order, distances and coordinates as printed, RESP2 and
//! RESP3 shapes, and error texts.

mod common;

use common::*;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

/// Runs a command given as owned words.
fn run_owned(t: &mut TestEngine, words: &[String]) -> String {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    t.run(&words)
}

/// The NYC points of Redis's geo tests, in a set `nyc`.
fn nyc() -> TestEngine {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["GEOADD", "nyc", "-73.9454966", "40.747533", "lic market"]),
        int(1)
    );
    #[rustfmt::skip]
    let more = [
        "GEOADD", "nyc",
        "-73.9733487", "40.7648057", "central park n/q/r",
        "-73.9903085", "40.7362513", "union square",
        "-74.0131604", "40.7126674", "wtc one",
        "-73.7858139", "40.6428986", "jfk",
        "-73.9375699", "40.7498929", "q4",
        "-73.9564142", "40.7480973", "4545",
    ];
    assert_eq!(t.run(&more), int(6));
    t
}

/// `*2` then a position as RESP2 bulk strings.
fn pos2(lon: &str, lat: &str) -> String {
    format!("*2\r\n{}{}", bulk(lon), bulk(lat))
}

/// `*2` then a position as RESP3 doubles.
fn pos3(lon: &str, lat: &str) -> String {
    format!("*2\r\n,{lon}\r\n,{lat}\r\n")
}

#[test]
fn geoadd_scores_are_redis_geohashes() {
    let mut t = nyc();
    let expected = [
        ("wtc one", "1791873972053020"),
        ("union square", "1791875485187452"),
        ("central park n/q/r", "1791875761332224"),
        ("4545", "1791875796750882"),
        ("lic market", "1791875804419201"),
        ("q4", "1791875830079666"),
        ("jfk", "1791895905559723"),
    ];
    let flat: Vec<&str> = expected.iter().flat_map(|(m, s)| [*m, *s]).collect();
    assert_eq!(
        t.run(&["ZRANGE", "nyc", "0", "-1", "WITHSCORES"]),
        bulks(&flat)
    );
    // The corners of the valid area.
    assert_eq!(
        t.run(&[
            "GEOADD",
            "edge",
            "180",
            "85.05112878",
            "ne",
            "-180",
            "-85.05112878",
            "sw"
        ]),
        int(2)
    );
    assert_eq!(t.run(&["ZSCORE", "edge", "sw"]), bulk("0"));
    assert_eq!(t.run(&["ZSCORE", "edge", "ne"]), bulk("13510798882111488"));
}

#[test]
fn geoadd_options() {
    let mut t = nyc();
    assert_eq!(
        t.run(&["GEOADD", "nyc", "-73.9454966", "40.747533", "lic market"]),
        int(0)
    );
    assert_eq!(
        t.run(&[
            "GEOADD",
            "nyc",
            "CH",
            "40.747533",
            "-73.9454966",
            "lic market"
        ]),
        int(1)
    );
    assert_eq!(
        t.run(&[
            "GEOADD",
            "nyc",
            "NX",
            "-73.9454966",
            "40.747533",
            "lic market"
        ]),
        int(0)
    );
    assert_eq!(
        t.run(&["ZSCORE", "nyc", "lic market"]),
        bulk("2315635802405705")
    );
    assert_eq!(
        t.run(&[
            "GEOADD",
            "nyc",
            "XX",
            "-83.9454966",
            "40.747533",
            "lic market"
        ]),
        int(0)
    );
    assert_eq!(
        t.run(&[
            "GEOADD",
            "nyc",
            "CH",
            "NX",
            "-73.9454966",
            "40.747533",
            "lic market"
        ]),
        int(0)
    );
    assert_eq!(
        t.run(&[
            "GEOADD",
            "nyc",
            "CH",
            "XX",
            "-73.9454966",
            "40.747533",
            "lic market"
        ]),
        int(1)
    );
    assert_eq!(
        t.run(&["ZSCORE", "nyc", "lic market"]),
        bulk("1791875804419201")
    );
    // XX never creates the key; CH counts changed members, new ones too.
    assert_eq!(t.run(&["GEOADD", "k", "XX", "CH", "1", "2", "a"]), int(0));
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    assert_eq!(
        t.run(&["GEOADD", "k", "CH", "1", "2", "a", "1", "2", "b"]),
        int(2)
    );
    assert_eq!(
        t.run(&["GEOADD", "k", "CH", "XX", "1", "3", "a", "1", "2", "c"]),
        int(1)
    );
    assert_eq!(t.run(&["ZCARD", "k"]), int(2));
}

#[test]
fn geoadd_errors() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&["GEOADD", "k", "XX", "NX", "1", "2", "m"]),
        err(SYNTAX)
    );
    assert_eq!(
        t.run(&["GEOADD", "k", "CH", "XX", "foo", "1", "2", "m"]),
        err(SYNTAX)
    );
    assert_eq!(t.run(&["GEOADD", "k", "CH", "CH", "CH"]), err(SYNTAX));
    // GT is not an option of GEOADD: it is read as a longitude.
    assert_eq!(t.run(&["GEOADD", "k", "GT", "1", "2"]), err(NOT_FLOAT));
    assert_eq!(
        t.run(&["GEOADD", "k", "1", "2"]),
        err("ERR wrong number of arguments for 'geoadd' command")
    );
    assert_eq!(
        t.run(&["GEOADD", "k", "200", "100", "m"]),
        err("ERR invalid longitude,latitude pair 200.000000,100.000000")
    );
    assert_eq!(
        t.run(&["GEOADD", "k", "10", "85.06", "m"]),
        err("ERR invalid longitude,latitude pair 10.000000,85.060000")
    );
    assert_eq!(
        t.run(&["GEOADD", "k", "-inf", "0", "m"]),
        err("ERR invalid longitude,latitude pair -inf,0.000000")
    );
    // Every pair is checked before anything is added.
    assert_eq!(
        t.run(&["GEOADD", "k", "1", "2", "a", "foo", "bar", "b"]),
        err(NOT_FLOAT)
    );
    assert_eq!(t.run(&["EXISTS", "k"]), int(0));
    assert_eq!(t.run(&["SET", "s", "x"]), OK);
    assert_eq!(t.run(&["GEOADD", "s", "1", "2", "m"]), err(WRONGTYPE));
}

#[test]
fn geopos_and_geohash() {
    let mut t = nyc();
    let wtc = pos2("-74.01316255331039429", "40.71266718145121644");
    assert_eq!(
        t.run(&["GEOPOS", "nyc", "wtc one", "nope"]),
        format!("*2\r\n{wtc}*-1\r\n")
    );
    assert_eq!(
        t.run(&["GEOPOS", "nokey", "a", "b"]),
        "*2\r\n*-1\r\n*-1\r\n"
    );
    assert_eq!(t.run(&["GEOPOS", "nyc"]), "*0\r\n");
    assert_eq!(
        t.run(&["GEOADD", "points", "-5.6", "42.6", "test", "10", "20", "a"]),
        int(2)
    );
    assert_eq!(
        t.run(&["GEOHASH", "points", "test", "nope"]),
        format!("*2\r\n{}{NIL}", bulk("ezs42e44yx0"))
    );
    assert_eq!(t.run(&["GEOHASH", "nokey", "x"]), format!("*1\r\n{NIL}"));
    assert_eq!(
        t.run(&["GEOPOS", "points", "a"]),
        format!(
            "*1\r\n{}",
            pos2("10.00000208616256714", "20.00000058910486445")
        )
    );
    t.resp3();
    let wtc = pos3("-74.01316255331039429", "40.71266718145121644");
    assert_eq!(
        t.run(&["GEOPOS", "nyc", "wtc one", "nope"]),
        format!("*2\r\n{wtc}_\r\n")
    );
    assert_eq!(t.run(&["GEOHASH", "points", "nope"]), "*1\r\n_\r\n");
    assert_eq!(t.run(&["SET", "s", "x"]), OK);
    assert_eq!(t.run(&["GEOPOS", "s", "a"]), err(WRONGTYPE));
    assert_eq!(t.run(&["GEOHASH", "s", "a"]), err(WRONGTYPE));
}

#[test]
fn geodist_units_and_misses() {
    let mut t = nyc();
    assert_eq!(
        t.run(&["GEODIST", "nyc", "wtc one", "jfk"]),
        bulk("20688.0430")
    );
    assert_eq!(
        t.run(&["GEODIST", "nyc", "wtc one", "jfk", "mi"]),
        bulk("12.8550")
    );
    assert_eq!(
        t.run(&["GEODIST", "nyc", "wtc one", "jfk", "KM"]),
        bulk("20.6880")
    );
    assert_eq!(
        t.run(&["GEODIST", "nyc", "wtc one", "wtc one"]),
        bulk("0.0000")
    );
    assert_eq!(t.run(&["GEODIST", "nyc", "wtc one", "nope"]), NIL);
    assert_eq!(t.run(&["GEODIST", "nokey", "a", "b"]), NIL);
    assert_eq!(
        t.run(&["GEODIST", "nyc", "wtc one", "jfk", "yd"]),
        err("ERR unsupported unit provided. please use M, KM, FT, MI")
    );
    assert_eq!(
        t.run(&["GEODIST", "nyc", "wtc one", "jfk", "km", "x"]),
        err(SYNTAX)
    );
    assert_eq!(
        t.run(&[
            "GEOADD",
            "sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania"
        ]),
        int(2)
    );
    assert_eq!(
        t.run(&["GEODIST", "sicily", "Palermo", "Catania"]),
        bulk("166274.1516")
    );
    t.resp3();
    // A bulk string in RESP3 too, and the RESP3 null.
    assert_eq!(
        t.run(&["GEODIST", "nyc", "wtc one", "jfk", "mi"]),
        bulk("12.8550")
    );
    assert_eq!(t.run(&["GEODIST", "nyc", "wtc one", "nope"]), "_\r\n");
}

#[test]
fn georadius_sorted_and_with_options() {
    let mut t = nyc();
    let near = ["-73.9798091", "40.7598464"];
    let run = |t: &mut TestEngine, extra: &[&str]| {
        let mut words = vec!["GEORADIUS", "nyc", near[0], near[1]];
        words.extend_from_slice(extra);
        t.run(&words)
    };
    assert_eq!(
        run(&mut t, &["3", "km", "asc"]),
        bulks(&["central park n/q/r", "4545", "union square"])
    );
    assert_eq!(
        run(&mut t, &["10", "km", "COUNT", "3"]),
        bulks(&["central park n/q/r", "4545", "union square"])
    );
    assert_eq!(
        run(&mut t, &["10", "km", "COUNT", "2", "DESC"]),
        bulks(&["wtc one", "q4"])
    );
    // ANY: the first points found, cell by cell, in score order.
    assert_eq!(
        run(&mut t, &["10", "km", "COUNT", "3", "ANY"]),
        bulks(&["wtc one", "union square", "central park n/q/r"])
    );
    assert_eq!(
        run(&mut t, &["10", "km", "COUNT", "3", "ANY", "ASC"]),
        bulks(&["central park n/q/r", "union square", "wtc one"])
    );
    let full = format!(
        "*3\r\n*4\r\n{}{}{}{}*4\r\n{}{}{}{}*4\r\n{}{}{}{}",
        bulk("central park n/q/r"),
        bulk("0.7750"),
        int(1791875761332224),
        pos2("-73.97334784269332886", "40.76480639569881959"),
        bulk("4545"),
        bulk("2.3651"),
        int(1791875796750882),
        pos2("-73.95641237497329712", "40.74809751381645384"),
        bulk("union square"),
        bulk("2.7697"),
        int(1791875485187452),
        pos2("-73.99031013250350952", "40.73625022711770782"),
    );
    // The options' order in the request does not change the reply's.
    assert_eq!(
        run(
            &mut t,
            &["3", "km", "WITHCOORD", "WITHHASH", "WITHDIST", "ASC"]
        ),
        full
    );
    t.resp3();
    let full3 = full
        .replace(
            &pos2("-73.97334784269332886", "40.76480639569881959"),
            &pos3("-73.97334784269332886", "40.76480639569881959"),
        )
        .replace(
            &pos2("-73.95641237497329712", "40.74809751381645384"),
            &pos3("-73.95641237497329712", "40.74809751381645384"),
        )
        .replace(
            &pos2("-73.99031013250350952", "40.73625022711770782"),
            &pos3("-73.99031013250350952", "40.73625022711770782"),
        );
    assert_ne!(full3, full);
    assert_eq!(
        run(
            &mut t,
            &["3", "km", "WITHDIST", "WITHHASH", "WITHCOORD", "ASC"]
        ),
        full3
    );
}

#[test]
fn georadiusbymember_and_ro_forms() {
    let mut t = nyc();
    let all = [
        "wtc one",
        "union square",
        "central park n/q/r",
        "4545",
        "lic market",
    ];
    assert_eq!(
        t.run(&["GEORADIUSBYMEMBER", "nyc", "wtc one", "7", "km"]),
        bulks(&all)
    );
    assert_eq!(
        t.run(&["GEORADIUSBYMEMBER_RO", "nyc", "wtc one", "7", "km"]),
        bulks(&all)
    );
    assert_eq!(
        t.run(&["GEORADIUSBYMEMBER", "nyc", "nope", "7", "km"]),
        err("ERR could not decode requested zset member")
    );
    // A missing key: the radius is not even read.
    assert_eq!(
        t.run(&["GEORADIUSBYMEMBER", "nokey", "x", "abc", "yd"]),
        "*0\r\n"
    );
    assert_eq!(
        t.run(&[
            "GEORADIUS_RO",
            "nyc",
            "-74",
            "40.7",
            "1",
            "km",
            "STORE",
            "d"
        ]),
        err(SYNTAX)
    );
    assert_eq!(
        t.run(&[
            "GEORADIUSBYMEMBER_RO",
            "nyc",
            "jfk",
            "1",
            "km",
            "STOREDIST",
            "d"
        ]),
        err(SYNTAX)
    );
    assert_eq!(
        t.run(&["GEORADIUS_RO", "nyc", "-74", "40.7", "3", "km"]),
        bulks(&["wtc one"])
    );
}

#[test]
fn geosearch_box_and_member() {
    let mut t = nyc();
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "nyc",
            "FROMLONLAT",
            "-73.9798091",
            "40.7598464",
            "BYBOX",
            "6",
            "6",
            "km",
            "ASC"
        ]),
        bulks(&["central park n/q/r", "4545", "union square", "lic market"])
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "nyc",
            "FROMMEMBER",
            "wtc one",
            "BYBOX",
            "14",
            "14",
            "km"
        ]),
        bulks(&[
            "wtc one",
            "union square",
            "central park n/q/r",
            "4545",
            "lic market",
            "q4"
        ])
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "nyc",
            "FROMLONLAT",
            "-73.9798091",
            "40.7598464",
            "BYRADIUS",
            "10",
            "km",
            "DESC",
            "COUNT",
            "2",
            "WITHDIST"
        ]),
        format!(
            "*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk("wtc one"),
            bulk("5.9530"),
            bulk("q4"),
            bulk("3.7269")
        )
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "nyc",
            "FROMMEMBER",
            "wtc one",
            "BYBOX",
            "14",
            "14",
            "km",
            "WITHCOORD",
            "COUNT",
            "2"
        ]),
        format!(
            "*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk("wtc one"),
            pos2("-74.01316255331039429", "40.71266718145121644"),
            bulk("union square"),
            pos2("-73.99031013250350952", "40.73625022711770782")
        )
    );
    // A box across the antimeridian.
    assert_eq!(
        t.run(&["GEOADD", "w", "179.5", "36", "p1", "-179.5", "36", "p2"]),
        int(2)
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "w",
            "FROMLONLAT",
            "179",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "ASC",
            "WITHDIST"
        ]),
        format!(
            "*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk("p1"),
            bulk("119.8737"),
            bulk("p2"),
            bulk("174.2313")
        )
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "w",
            "FROMLONLAT",
            "-179",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "ASC"
        ]),
        bulks(&["p2", "p1"])
    );
}

#[test]
fn search_errors() {
    let mut t = nyc();
    let lonlat = ["FROMLONLAT", "-73.9798091", "40.7598464"];
    let search = |t: &mut TestEngine, rest: &[&str]| {
        let mut words = vec!["GEOSEARCH", "nyc"];
        words.extend_from_slice(rest);
        t.run(&words)
    };
    assert_eq!(
        search(
            &mut t,
            &[
                lonlat[0],
                lonlat[1],
                lonlat[2],
                "FROMMEMBER",
                "xxx",
                "BYBOX",
                "6",
                "6",
                "km"
            ]
        ),
        err(SYNTAX)
    );
    assert_eq!(
        search(
            &mut t,
            &[
                "BYBOX",
                "3",
                "3",
                "km",
                "ASC",
                "DESC",
                "WITHHASH",
                "WITHDIST",
                "WITHCOORD"
            ]
        ),
        err("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH")
    );
    assert_eq!(
        t.run(&["geoSearch", "nyc", "BYBOX", "3", "3", "km", "ASC"]),
        err("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geoSearch")
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "BYRADIUS", "3", "km", "BYBOX", "3", "3", "km"]
        ),
        err(SYNTAX)
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "ASC", "WITHDIST"]
        ),
        err("ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH")
    );
    assert_eq!(
        search(
            &mut t,
            &[
                lonlat[0],
                lonlat[1],
                lonlat[2],
                "BYBOX",
                "6",
                "6",
                "km",
                "STOREDIST"
            ]
        ),
        err(SYNTAX)
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "BYBOX", "6", "-6", "km"]
        ),
        err("ERR height or width cannot be negative")
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "BYBOX", "x", "6", "km"]
        ),
        err("ERR need numeric width")
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "BYBOX", "6", "x", "km"]
        ),
        err("ERR need numeric height")
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "BYRADIUS", "x", "km"]
        ),
        err("ERR need numeric radius")
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "BYRADIUS", "-1", "km"]
        ),
        err("ERR radius cannot be negative")
    );
    assert_eq!(
        search(
            &mut t,
            &[lonlat[0], lonlat[1], lonlat[2], "BYRADIUS", "1", "yd"]
        ),
        err("ERR unsupported unit provided. please use M, KM, FT, MI")
    );
    assert_eq!(
        search(&mut t, &["FROMLONLAT", "1", "90", "BYRADIUS", "1", "km"]),
        err("ERR invalid longitude,latitude pair 1.000000,90.000000")
    );
    assert_eq!(
        search(&mut t, &["FROMMEMBER", "nope", "BYRADIUS", "1", "km"]),
        err("ERR could not decode requested zset member")
    );
    let radius = |t: &mut TestEngine, rest: &[&str]| {
        let mut words = vec!["GEORADIUS", "nyc", "-73.9798091", "40.7598464", "10", "km"];
        words.extend_from_slice(rest);
        t.run(&words)
    };
    assert_eq!(
        radius(&mut t, &["ANY", "ASC"]),
        err("ERR the ANY argument requires COUNT argument")
    );
    assert_eq!(radius(&mut t, &["COUNT"]), err(SYNTAX));
    assert_eq!(
        radius(&mut t, &["COUNT", "0"]),
        err("ERR COUNT must be > 0")
    );
    assert_eq!(radius(&mut t, &["COUNT", "x"]), err(NOT_INT));
    assert_eq!(radius(&mut t, &["STORE"]), err(SYNTAX));
    assert_eq!(radius(&mut t, &["FROMMEMBER", "wtc one"]), err(SYNTAX));
    for with in ["WITHDIST", "WITHHASH", "WITHCOORD"] {
        assert_eq!(
            radius(&mut t, &["STORE", "d", with]),
            err("ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
        );
    }
    assert_eq!(
        t.run(&[
            "GEOSEARCHSTORE",
            "d",
            "nyc",
            "FROMMEMBER",
            "jfk",
            "BYRADIUS",
            "1",
            "km",
            "WITHDIST"
        ]),
        err("ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCHSTORE",
            "d",
            "nyc",
            "FROMMEMBER",
            "jfk",
            "BYRADIUS",
            "1",
            "km",
            "STORE",
            "x"
        ]),
        err(SYNTAX)
    );
    // The source's type is checked first; a missing source still checks
    // the arguments.
    assert_eq!(t.run(&["SET", "s", "x"]), OK);
    assert_eq!(
        t.run(&["GEORADIUS", "s", "200", "1", "1", "m"]),
        err(WRONGTYPE)
    );
    assert_eq!(
        t.run(&["GEOSEARCH", "s", "x", "y", "z", "w", "v"]),
        err(WRONGTYPE)
    );
    assert_eq!(
        t.run(&["GEORADIUS", "nokey", "15", "37", "-200", "km"]),
        err("ERR radius cannot be negative")
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "nokey",
            "FROMMEMBER",
            "nope",
            "BYRADIUS",
            "1",
            "km"
        ]),
        "*0\r\n"
    );
}

#[test]
fn store_and_storedist() {
    let mut t = nyc();
    assert_eq!(
        t.run(&[
            "GEORADIUSBYMEMBER",
            "nyc",
            "wtc one",
            "7",
            "km",
            "STOREDIST",
            "d"
        ]),
        int(5)
    );
    assert_eq!(
        t.run(&["ZRANGE", "d", "0", "-1", "WITHSCORES"]),
        bulks(&[
            "wtc one",
            "0",
            "union square",
            "3.254395457335749",
            "4545",
            "6.1975173818005214",
            "central park n/q/r",
            "6.7000029092798545",
            "lic market",
            "6.8968709532086461",
        ])
    );
    assert_eq!(
        t.run(&["GEORADIUS", "nyc", "-74", "40.7", "3", "km", "STORE", "d"]),
        int(1)
    );
    assert_eq!(
        t.run(&["ZRANGE", "d", "0", "-1", "WITHSCORES"]),
        bulks(&["wtc one", "1791873972053020"])
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCHSTORE",
            "d2",
            "nyc",
            "FROMMEMBER",
            "wtc one",
            "BYBOX",
            "14",
            "14",
            "km",
            "COUNT",
            "2",
            "DESC"
        ]),
        int(2)
    );
    assert_eq!(
        t.run(&["ZRANGE", "d2", "0", "-1"]),
        bulks(&["lic market", "q4"])
    );
    assert_eq!(
        t.run(&[
            "GEOSEARCHSTORE",
            "d2",
            "nyc",
            "FROMMEMBER",
            "wtc one",
            "BYRADIUS",
            "3",
            "km",
            "STOREDIST"
        ]),
        int(1)
    );
    assert_eq!(
        t.run(&["ZRANGE", "d2", "0", "-1", "WITHSCORES"]),
        bulks(&["wtc one", "0"])
    );
    // Nothing found, or no source: the destination is deleted.
    assert_eq!(
        t.run(&["GEORADIUS", "nyc", "0", "0", "1", "km", "STORE", "d"]),
        int(0)
    );
    assert_eq!(t.run(&["EXISTS", "d"]), int(0));
    assert_eq!(
        t.run(&[
            "GEOSEARCHSTORE",
            "d2",
            "nokey",
            "FROMMEMBER",
            "x",
            "BYRADIUS",
            "1",
            "km"
        ]),
        int(0)
    );
    assert_eq!(t.run(&["EXISTS", "d2"]), int(0));
    // The source may be the destination.
    assert_eq!(
        t.run(&[
            "GEOSEARCHSTORE",
            "nyc",
            "nyc",
            "FROMMEMBER",
            "jfk",
            "BYRADIUS",
            "1",
            "m",
            "STOREDIST"
        ]),
        int(1)
    );
    assert_eq!(
        t.run(&["ZRANGE", "nyc", "0", "-1", "WITHSCORES"]),
        bulks(&["jfk", "0"])
    );
}

#[test]
fn count_orders_equal_distances_as_redis() {
    let mut t = TestEngine::new();
    let mut words: Vec<String> = vec!["GEOADD".into(), "t".into()];
    for m in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        words.extend(["10".into(), "20".into(), m.into()]);
    }
    words.extend(["10.001".into(), "20".into(), "i".into()]);
    assert_eq!(run_owned(&mut t, &words), int(9));
    // Redis's partial quicksort, not a stable sort (which says i a b).
    assert_eq!(
        t.run(&[
            "GEORADIUS",
            "t",
            "10",
            "20",
            "1",
            "km",
            "COUNT",
            "3",
            "DESC"
        ]),
        bulks(&["i", "b", "c"])
    );
    assert_eq!(
        t.run(&["GEORADIUS", "t", "10", "20", "1", "km", "COUNT", "3"]),
        bulks(&["a", "b", "c"])
    );
    // Every point: a stable sort.
    assert_eq!(
        t.run(&["GEORADIUS", "t", "10", "20", "1", "km", "DESC"]),
        bulks(&["i", "a", "b", "c", "d", "e", "f", "g", "h"])
    );
}

#[test]
fn huge_radius_and_poles() {
    let mut t = TestEngine::new();
    assert_eq!(
        t.run(&[
            "GEOADD",
            "users",
            "-47.271613776683807",
            "-54.534504198047678",
            "user_000000"
        ]),
        int(1)
    );
    let r = t.run(&["GEORADIUS", "users", "0", "0", "50000", "km", "WITHCOORD"]);
    assert!(r.starts_with("*1\r\n"), "{r}");
    assert_eq!(
        t.run(&["GEORADIUS", "users", "0", "0", "inf", "km", "COUNT", "1"]),
        bulks(&["user_000000"])
    );
    assert_eq!(
        t.run(&["GEOADD", "k1", "45", "65", "n1", "-135", "85.05", "n2"]),
        int(2)
    );
    assert_eq!(
        t.run(&["GEORADIUSBYMEMBER", "k1", "n1", "5009431", "m"]),
        bulks(&["n1", "n2"])
    );
    assert_eq!(
        t.run(&[
            "GEOADD",
            "k2",
            "-0.15307903289794921875",
            "85",
            "n1",
            "0.3515625",
            "85.00019260486917005437",
            "n2"
        ]),
        int(2)
    );
    assert_eq!(
        t.run(&["GEORADIUSBYMEMBER", "k2", "n1", "4891.94", "m"]),
        bulks(&["n1", "n2"])
    );
}

#[test]
fn geo_sets_are_sorted_sets() {
    let mut t = TestEngine::new();
    // A score that was never a geohash still decodes (as in Redis).
    assert_eq!(t.run(&["ZADD", "z", "0", "origin"]), int(1));
    assert_eq!(
        t.run(&["GEOPOS", "z", "origin"]),
        format!(
            "*1\r\n{}",
            pos2("-179.99999731779098511", "-85.05112751263942528")
        )
    );
    assert_eq!(
        t.run(&["GEOHASH", "z", "origin"]),
        format!("*1\r\n{}", bulk("00bh0hbj200"))
    );
    assert_eq!(t.run(&["TYPE", "z"]), "+zset\r\n");
    assert_eq!(t.run(&["GEOADD", "z", "10", "20", "p"]), int(1));
    assert_eq!(t.run(&["ZREM", "z", "p"]), int(1));
    assert_eq!(
        t.run(&[
            "GEOSEARCH",
            "z",
            "FROMLONLAT",
            "10",
            "20",
            "BYRADIUS",
            "1",
            "km"
        ]),
        "*0\r\n"
    );
}

#[test]
fn table_entries() {
    use engine::command::lookup;
    let mut t = TestEngine::new();
    let r = t.run(&["COMMAND", "INFO", "geoadd"]);
    assert!(
        r.starts_with("*1\r\n*10\r\n$6\r\ngeoadd\r\n:-5\r\n*2\r\n+write\r\n+denyoom\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@geo\r\n+@slow\r\n"),
        "{r}"
    );
    // GEOSEARCHSTORE reads one key and writes another in one section;
    // GEORADIUS enters one itself only when it is given STORE.
    assert!(lookup(b"geosearchstore").unwrap().needs_exclusive(8));
    for name in [
        &b"geoadd"[..],
        b"geosearch",
        b"georadius",
        b"georadiusbymember",
    ] {
        assert!(!lookup(name).unwrap().needs_exclusive(8), "{name:?}");
    }
}
