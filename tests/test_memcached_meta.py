"""memcached's meta commands (mg, ms, md, ma, mn, me) against shoal, over
raw sockets for exact bytes.

Tests taking `port` run against shoal and against a real memcached 1.6.
CAS values differ between the two (shoal's is the write's log position), so
those tests compare a CAS value with the one the same server returned
before, never with a fixed number. The flags shoal refuses on purpose (they
need per-item state it does not keep) are tested against shoal alone.
"""

import re

import pytest

from memcachetest import Mc, empty, memcached, target_port  # noqa: F401 (fixture)


@pytest.fixture(params=["shoal", "memcached"])
def port(request):
    return target_port(request)


@pytest.fixture
def c(port):
    conn = Mc(port)
    yield conn
    conn.close()


@pytest.fixture
def shoal(server):
    empty(server.mc_port)
    conn = Mc(server.mc_port)
    yield conn
    conn.close()
    empty(server.mc_port)


def cas_of(reply):
    m = re.search(rb" c(\d+)", reply)
    assert m, reply
    return int(m.group(1))


def test_mn(c):
    assert c.ask(b"") == b""
    c.send(b"mn\r\n")
    assert c.read_until(b"MN\r\n") == b"MN\r\n"


def test_ms_mg_basics(c):
    assert c.ask(b"ms k 5\r\nhello\r\n") == b"HD\r\n"
    assert c.ask(b"mg k v\r\n") == b"VA 5\r\nhello\r\n"
    assert c.ask(b"mg k\r\n") == b"HD\r\n"
    assert c.ask(b"mg k s f t v\r\n") == b"VA 5 s5 f0 t-1\r\nhello\r\n"
    assert c.ask(b"mg missing v\r\n") == b"EN\r\n"
    assert c.ask(b"ms empty 0\r\n\r\nmg empty v s\r\n") == b"HD\r\nVA 0 s0\r\n\r\n"


def test_return_flags_in_the_order_sent(c):
    stored = c.ask(b"ms k 5 T100 F7 c k O1\r\nhello\r\n")
    assert re.fullmatch(rb"HD c\d+ kk O1\r\n", stored), stored
    cas = cas_of(stored)
    got = c.ask(b"mg k O5 k f v c s\r\n")
    assert got == b"VA 5 O5 kk f7 c%d s5\r\nhello\r\n" % cas
    assert c.ask(b"mg k t\r\n") in (b"HD t100\r\n", b"HD t99\r\n")


def test_mg_q_withholds_only_a_miss(c):
    c.ask(b"ms k 1\r\nx\r\n")
    assert c.ask(b"mg missing v q\r\nmg missing q k O1\r\n") == b""
    assert c.ask(b"mg k q\r\nmg k v q\r\n") == b"HD\r\nVA 1\r\nx\r\n"
    assert c.ask(b"mg missing k O1\r\n") == b"EN kmissing O1\r\n"


def test_mg_T_touches(c):
    c.ask(b"ms k 5 T100\r\nhello\r\n")
    assert c.ask(b"mg k T50 t\r\n") in (b"HD t50\r\n", b"HD t49\r\n")
    assert c.ask(b"mg k T0 t\r\n") == b"HD t-1\r\n"


def test_ms_modes(c):
    assert c.ask(b"ms k 1\r\na\r\nms k 1 MA\r\nb\r\nms k 1 MP\r\nc\r\nmg k v\r\n") == \
        b"HD\r\nHD\r\nHD\r\nVA 3\r\ncab\r\n"
    assert c.ask(b"ms k 1 ME\r\nz\r\n") == b"NS\r\n"
    assert c.ask(b"ms new 1 ME\r\nz\r\n") == b"HD\r\n"
    assert c.ask(b"ms nope 1 MR\r\nz\r\nms nope 1 MA\r\nz\r\nms nope 1 MP\r\nz\r\n") == \
        b"NS\r\nNS\r\nNS\r\n"
    assert c.ask(b"ms k 1 MS F5 T0\r\nz\r\nmg k v f\r\n") == b"HD\r\nVA 1 f5\r\nz\r\n"
    assert c.ask(b"ms k 1 MR\r\ny\r\nmg k v\r\n") == b"HD\r\nVA 1\r\ny\r\n"


def test_ms_compare_cas(c):
    cas = cas_of(c.ask(b"ms k 1 c\r\na\r\n"))
    assert c.ask(b"ms k 1 C%d\r\nb\r\n" % (cas + 1000)) == b"EX\r\n"
    assert c.ask(b"ms nope 1 C1\r\nb\r\n") == b"NF\r\n"
    assert c.ask(b"ms nope 1 MP C1\r\nb\r\n") == b"NS\r\n"
    again = c.ask(b"ms k 1 C%d c\r\nb\r\n" % cas)
    assert re.fullmatch(rb"HD c\d+\r\n", again)
    assert cas_of(again) != cas
    assert c.ask(b"mg k v\r\n") == b"VA 1\r\nb\r\n"
    # A failed store reports CAS 0, as memcached does.
    assert c.ask(b"ms k 1 ME c\r\nz\r\n") == b"NS c0\r\n"


def test_ms_q_withholds_only_success(c):
    assert c.ask(b"ms k 1 q\r\na\r\nms k 1 q ME\r\nb\r\n") == b"NS\r\n"


def test_ms_errors(c):
    # Refused before the length is known: the block is read as a command.
    assert c.ask(b"ms k\r\nhello\r\n") == b"CLIENT_ERROR bad command line format\r\nERROR\r\n"
    assert c.ask(b"ms k -1\r\nhello\r\n") == b"CLIENT_ERROR bad command line format\r\nERROR\r\n"
    # Refused after: the block is skipped.
    assert c.ask(b"ms k 5 MX\r\nhello\r\n") == b"CLIENT_ERROR invalid mode for ms M token\r\n"
    assert c.ask(b"ms k 5 Fx\r\nhello\r\n") == b"CLIENT_ERROR bad command line format\r\n"
    assert c.ask(b"ms k 5 Tx\r\nhello\r\n") == b"CLIENT_ERROR bad token in command line format\r\n"
    assert c.ask(b"ms k 5 T1 T2\r\nhello\r\n") == b"CLIENT_ERROR duplicate flag\r\n"
    assert c.ask(b"ms k 5 Z\r\nhello\r\n") == b"CLIENT_ERROR invalid flag\r\n"
    assert c.ask(b"ms k 5 O%s\r\nhello\r\n" % (b"1" * 40)) == \
        b"CLIENT_ERROR opaque token too long\r\n"
    assert c.ask(b"ms k 5 q\r\nhelloXX\r\n") == b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"
    # Too large: always reported, and the old item goes, whatever the mode.
    assert c.ask(b"ms k 1\r\nx\r\n") == b"HD\r\n"
    big = b"x" * ((1 << 20) + 1)
    assert c.ask(b"ms k %d q MA\r\n%s\r\n" % (len(big), big)) == \
        b"SERVER_ERROR object too large for cache\r\n"
    assert c.ask(b"mg k v\r\n") == b"EN\r\n"


def test_md(c):
    assert c.ask(b"md k O1 k q\r\n") == b"NF O1 kk\r\n", "q does not hide NF"
    cas = cas_of(c.ask(b"ms k 1 c\r\na\r\n"))
    assert c.ask(b"md k C%d O2 k\r\n" % (cas + 1000)) == b"EX O2 kk\r\n"
    assert c.ask(b"md k C%d k\r\n" % cas) == b"HD kk\r\n"
    assert c.ask(b"mg k\r\n") == b"EN\r\n"
    c.ask(b"ms k 1\r\na\r\n")
    assert c.ask(b"md k q O3\r\n") == b""
    assert c.ask(b"md k\r\n") == b"NF\r\n"
    assert c.ask(b"md k x\r\n") == b"CLIENT_ERROR invalid or duplicate flag\r\n"


def test_ma(c):
    assert c.ask(b"ma n O1 k\r\n") == b"NF O1 kn\r\n"
    created = c.ask(b"ma n N0 J5 O2 k v c\r\n")
    assert re.fullmatch(rb"VA 1 O2 kn c\d+\r\n5\r\n", created), created
    assert c.ask(b"ma n q\r\n") == b""
    assert c.ask(b"ma n v\r\n") == b"VA 1\r\n7\r\n"
    assert c.ask(b"ma n MD D10 v\r\n") == b"VA 1\r\n0\r\n"
    assert c.ask(b"ma n M+ D18446744073709551615 v\r\n") == b"VA 20\r\n18446744073709551615\r\n"
    assert c.ask(b"ma n MI v\r\n") == b"VA 1\r\n0\r\n", "incr wraps"
    assert c.ask(b"ma n M- v\r\n") == b"VA 1\r\n0\r\n"
    assert c.ask(b"ma n C1\r\n") == b"EX\r\n"
    cas = cas_of(c.ask(b"mg n c\r\n"))
    assert c.ask(b"ma n C%d\r\n" % cas) == b"HD\r\n"
    assert c.ask(b"ma n T100 t v\r\n") in (b"VA 1\r\n2\r\n".replace(b"VA 1", b"VA 1 t100"),
                                           b"VA 1 t99\r\n2\r\n")
    assert c.ask(b"ma n\r\n") == b"HD\r\n"


def test_ma_errors(c):
    c.ask(b"ms word 2\r\nab\r\n")
    non_numeric = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    assert c.ask(b"ma word\r\n") == non_numeric
    assert c.ask(b"ma word q\r\n") == non_numeric, "errors are always returned"
    assert c.ask(b"ma n Mx\r\n") == b"CLIENT_ERROR invalid mode for ma M token\r\n"
    for bad in (b"Dx", b"D-1", b"J18446744073709551616", b"v v"):
        assert c.ask(b"ma n %s\r\n" % bad) == b"CLIENT_ERROR invalid or duplicate flag\r\n", bad


def test_base64_keys(c):
    stored = c.ask(b"ms a2V5 5 b k c\r\nhello\r\n")
    assert re.fullmatch(rb"HD ka2V5 b c\d+\r\n", stored), stored
    assert c.ask(b"mg a2V5 b k v\r\n") == b"VA 5 ka2V5 b\r\nhello\r\n"
    # The decoded key is the key: "key" in plain text is the same item.
    assert c.ask(b"mg key v\r\n") == b"VA 5\r\nhello\r\n"
    assert c.ask(b"mg a2V5 v\r\n") == b"EN\r\n"
    assert c.ask(b"mg k b\r\n") == b"CLIENT_ERROR error decoding key\r\n"
    assert c.ask(b"md a2V5 b q\r\nmg key v\r\n") == b"EN\r\n"


def test_flag_errors(c):
    assert c.ask(b"mg\r\n") == b"ERROR\r\n"
    assert c.ask(b"mg k x\r\n") == b"CLIENT_ERROR invalid flag\r\n"
    assert c.ask(b"mg k v v\r\n") == b"CLIENT_ERROR duplicate flag\r\n"
    assert c.ask(b"mg k Tx\r\n") == b"CLIENT_ERROR bad token in command line format\r\n"
    assert c.ask(b"mg k M\r\n") == b"CLIENT_ERROR incorrect length for M token\r\n"
    assert c.ask(b"mg %s v\r\n" % (b"a" * 251)) == b"CLIENT_ERROR bad command line format\r\n"
    assert c.ask(b"mg k O%s\r\n" % (b"1" * 40)) == b"CLIENT_ERROR opaque token too long\r\n"
    many = b" ".join(bytes([f]) for f in b"abcdefghijklmnopqrstuvwxyz")
    assert c.ask(b"mg k %s\r\n" % many) == b"CLIENT_ERROR options flags are too long\r\n"
    assert c.ask(b"md k %s\r\n" % many) == b"CLIENT_ERROR options flags too long\r\n"
    assert c.ask(b"mg k P1 Lx\r\n") == b"EN\r\n", "proxy hints are ignored"


def test_me(c):
    assert c.ask(b"me k\r\n") == b"EN\r\n"
    assert c.ask(b"me\r\n") == b"CLIENT_ERROR bad command line format\r\n"
    assert c.ask(b"me k b\r\n") == b"CLIENT_ERROR bad command line format\r\n"
    c.ask(b"ms k 3 T100\r\nabc\r\n")
    reply = c.ask(b"me k\r\n")
    assert re.match(rb"ME k exp=-(100|99) la=\d+ cas=\d+ ", reply), reply


def test_me_prints_what_shoal_knows(shoal):
    cas = cas_of(shoal.ask(b"ms k 3 c\r\nabc\r\n"))
    # memcached adds fetch= and cls=, which shoal does not keep.
    assert shoal.ask(b"me k\r\n") == b"ME k exp=-1 la=0 cas=%d size=3\r\n" % cas
    assert shoal.ask(b"me a2V5 b\r\n") == b"EN\r\n"
    shoal.ask(b"ms key 1\r\nx\r\n")
    assert re.fullmatch(rb"ME a2V5 exp=-1 la=0 cas=\d+ size=1\r\n", shoal.ask(b"me a2V5 b\r\n"))


@pytest.mark.parametrize("line", [b"mg k h", b"mg k u", b"mg k N30", b"mg k R30"])
def test_mg_flags_needing_item_state_are_refused(shoal, line):
    # h (hit before), u (no LRU bump), N and R (win tokens W/Z/X) need
    # per-item state shoal does not keep: refused, not faked.
    shoal.ask(b"ms k 1\r\nx\r\n")
    assert shoal.ask(line + b"\r\n") == b"CLIENT_ERROR invalid flag\r\n"


def test_invalidate_is_refused(shoal):
    shoal.ask(b"ms k 1\r\nx\r\n")
    assert shoal.ask(b"md k I\r\n") == b"CLIENT_ERROR invalid or duplicate flag\r\n"
    assert shoal.ask(b"ms k 1 I\r\ny\r\n") == b"CLIENT_ERROR invalid flag\r\n"
    assert shoal.ask(b"mg k v\r\n") == b"VA 1\r\nx\r\n"
    # E (an explicit CAS value) cannot be honoured: the CAS is the write's
    # log position. memcached 1.6's first meta releases refuse it alike.
    assert shoal.ask(b"ms k 1 E5\r\nz\r\n") == b"CLIENT_ERROR invalid flag\r\n"


def test_meta_and_classic_mix_in_one_pipeline(c):
    reply = c.ask(b"set k 3 0 2\r\nhi\r\nmg k v f\r\nms k 2 F9\r\nyo\r\nget k\r\n"
                  b"ma n N0 J1\r\nincr n 1\r\nmg n v\r\ndelete n\r\nmg n\r\n")
    assert reply == (b"STORED\r\nVA 2 f3\r\nhi\r\nHD\r\nVALUE k 9 2\r\nyo\r\nEND\r\n"
                     b"HD\r\n2\r\nVA 1\r\n2\r\nDELETED\r\nEN\r\n")


def test_ma_t_reports_the_ttl(c):
    c.ask(b"ms n 1 T100\r\n1\r\n")
    assert c.ask(b"ma n t\r\n") in (b"HD t100\r\n", b"HD t99\r\n")
    c.ask(b"ms m 1\r\n1\r\n")
    assert c.ask(b"ma m t v\r\n") == b"VA 1 t-1\r\n2\r\n"
