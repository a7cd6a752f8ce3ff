"""DUMP and RESTORE between shoal and a real redis-server 7.0: payloads
from either restore in the other with the same contents, for every type and
every encoding Redis 7.0 writes (listpacks, quicklists with LZF-compressed
nodes, intsets, skiplists, LZF strings) and older ones it still reads
(ziplists, quicklist 1, zipmap, plain lists), and both refuse damaged
payloads with the same errors."""

import pytest
import redis

from shoaltest import TARGET

pytestmark = pytest.mark.skipif(TARGET == "redis", reason="compares shoal with redis-server")


def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected, no final xor)."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    return crc


def sealed(body, version=10):
    p = body + version.to_bytes(2, "little")
    return p + crc64(p).to_bytes(8, "little")


def test_crc64_is_redis_one():
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


def fill(c):
    """One key of every type and encoding Redis 7.0 writes."""
    c.set("s_raw", "bar")
    c.set("s_int", "12345")
    c.set("s_lzf", "x" * 100)
    c.set("s_big_int", "-9223372036854775808")
    c.set("s_bin", b"\x00\xff" * 40)
    c.rpush("l_small", "a", "1", "bb", "-5000", "70000", "9999999999", "y" * 70, "z" * 5000)
    c.rpush("l_big", *[f"item{i}" for i in range(3000)])
    c.sadd("set_int", 1, 2, 3, -100000, 99999999999)
    c.sadd("set_str", "a", "b", 3)
    c.sadd("set_big", *range(1000))
    c.hset("h_small", mapping={"f1": "v1", "f2": "2", "f3": "x" * 10})
    c.hset("h_many", mapping={f"f{i}": f"v{i}" for i in range(500)})
    c.hset("h_long", mapping={"big": "q" * 100, "small": 1})
    c.zadd("z_small", {"a": 1, "b": 1.5, "c": -2, "d": float("inf"), "e": 0.1, "f": 1e300})
    c.zadd("z_many", {f"m{i}": i / 3 for i in range(300)})
    c.zadd("z_long", {"x" * 100: 5, "y": float("-inf")})


def content(c, k):
    t = c.type(k)
    if t == "string":
        return c.get(k)
    if t == "list":
        return c.lrange(k, 0, -1)
    if t == "set":
        return sorted(c.smembers(k))
    if t == "hash":
        return sorted(c.hgetall(k).items())
    if t == "zset":
        return c.zrange(k, 0, -1, withscores=True)
    return t


@pytest.fixture
def ref(redis_ref):
    c = redis_ref.client(decode_responses=False)
    c.flushall()
    c.config_set("list-compress-depth", 0)
    yield c
    c.config_set("list-compress-depth", 0)
    c.close()


def keys_of(c):
    return sorted(k.decode() for k in c.keys())


@pytest.mark.parametrize("direction", ["redis-to-shoal", "shoal-to-redis"])
def test_every_type_crosses(rb, ref, direction):
    src, dst = (ref, rb) if direction == "redis-to-shoal" else (rb, ref)
    fill(src)
    for k in keys_of(src):
        payload = src.dump(k)
        assert dst.restore(k, 0, payload), k
        assert content(dst, k) == content(src, k), k
        assert dst.ttl(k) == -1


def test_redis_lzf_strings_and_compressed_list_nodes(rb, ref):
    ref.set("s", "abc" * 1000)
    assert ref.dump("s")[:2] == b"\x00\xc3"  # LZF
    ref.config_set("list-compress-depth", 1)
    ref.rpush("l", *[f"element-{i % 7}" for i in range(5000)])
    for k in ("s", "l"):
        assert rb.restore(k, 0, ref.dump(k))
        assert content(rb, k) == content(ref, k)


def test_ttl_and_replace_cross(rb, ref):
    ref.set("k", "v")
    ref.pexpire("k", 100_000)
    payload = ref.dump("k")
    assert rb.restore("k", 50_000, payload)
    assert 40_000 < rb.pttl("k") <= 50_000
    with pytest.raises(redis.ResponseError, match="^BUSYKEY Target key name already exists.$"):
        rb.restore("k", 0, payload)
    assert rb.restore("k", 0, payload, replace=True)
    assert rb.ttl("k") == -1


# Bodies of encodings Redis 7.0 reads but no longer writes.
ZIPLIST = b"\x10\x00\x00\x00\x0d\x00\x00\x00\x02\x00\x00\x01a\x03\xf6\xff"
PAIRS_ZIPLIST = b"\x12\x00\x00\x00\x0d\x00\x00\x00\x02\x00\x00\x01f\x03\x02-1\xff"
OLD_BODIES = {
    "list_ziplist": bytes([10, len(ZIPLIST)]) + ZIPLIST,
    "list_quicklist1": bytes([14, 1, len(ZIPLIST)]) + ZIPLIST,
    "list_plain": b"\x01\x02\x01a\xc0\x07",
    "hash_ziplist": bytes([13, len(PAIRS_ZIPLIST)]) + PAIRS_ZIPLIST,
    "zset_ziplist": bytes([12, len(PAIRS_ZIPLIST)]) + PAIRS_ZIPLIST,
    "hash_zipmap": b"\x09\x09\x01\x01f\x02\x01vvx\xff",
    "zset_text_scores": b"\x03\x02\x01a\x031.5\x01b\xfe",
    "set_plain": b"\x02\x02\x01a\xc0\x07",
    "hash_plain": b"\x04\x01\x01f\xc1\x00\x01",
}


@pytest.mark.parametrize("name", sorted(OLD_BODIES))
def test_older_encodings_read_as_redis_reads_them(rb, ref, name):
    payload = sealed(OLD_BODIES[name], version=9)
    assert ref.restore(name, 0, payload)
    assert rb.restore(name, 0, payload)
    assert content(rb, name) == content(ref, name)


BAD = [
    b"",
    b"\x00\x03bar",
    sealed(b"\x00\x03bar")[:-1],
    sealed(b"\x00\x03bar", version=11),
    sealed(b"\x00\x0ebar"),
    sealed(b"\x01\x00"),
    sealed(b"\x02\x02\x01a\x01a"),
    sealed(b"\x0b\x04\x02\x00\x00\x00"),
    sealed(b"\x12\x01\x03\x01x"),
    sealed(b"\x14\x00"),
]


@pytest.mark.parametrize("payload", BAD, ids=range(len(BAD)))
def test_damaged_payloads_get_redis_errors(rb, ref, payload):
    ref.config_set("sanitize-dump-payload", "yes")
    errors = []
    for c in (ref, rb):
        with pytest.raises(redis.ResponseError) as e:
            c.restore("k", 0, payload)
        errors.append(str(e.value))
    ref.config_set("sanitize-dump-payload", "no")
    assert errors[1] == errors[0]
    assert not rb.exists("k")


def test_a_value_may_run_into_the_footer_as_in_redis(rb, ref):
    # Redis reads the value from the whole payload: a length 2 bytes too
    # long takes the version's bytes.
    payload = sealed(b"\x00\x05bar")
    assert ref.restore("k", 0, payload)
    assert rb.restore("k", 0, payload)
    assert rb.get("k") == ref.get("k") == b"bar\n\x00"
