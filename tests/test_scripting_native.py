"""redis.call and redis.pcall as natives: a `return redis.call(...)` tail
call keeps the script's frame, so its error carries Redis's
` script: <sha>, on @user_script:N.` suffix; a call takes Redis's 7999
arguments from `unpack`; an error caught by pcall leaves later calls with
nearly full stacks working. Run against redis-server too (`srv`)."""

import pytest
import redis


def error_of(r, *args):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def test_tail_call_error_names_the_script_line(srv):
    r = srv.client()
    body = "return redis.call('publish','ch','msg')"
    sha = r.script_load(body)
    text = error_of(r, "EVAL_RO", body, 0)
    assert text == ("Write commands are not allowed from read-only scripts. "
                    f"script: {sha}, on @user_script:1.")
    body = "\n\nreturn redis.call('nosuchcommand')"
    sha = r.script_load(body)
    text = error_of(r, "EVAL", body, 0)
    assert text == f"Unknown Redis command called from script script: {sha}, on @user_script:3."


def test_pcall_hands_back_the_error_table(srv):
    r = srv.client()
    assert r.eval("local ok, e = pcall(redis.call, 'nosuchcommand') "
                  "return {tostring(ok), e}", 0) == [
        "false", "ERR Unknown Redis command called from script"]
    r.set("s", "text")
    with pytest.raises(redis.ResponseError) as e:
        r.eval("return redis.pcall('incr', 's')", 0)
    assert str(e.value) == "value is not an integer or out of range"


def test_many_arguments_after_caught_errors(srv):
    r = srv.client()
    r.delete("l")
    body = ("for i = 1, 3 do pcall(redis.call, 'nosuchcommand') end "
            "local a = {} for i = 1, 7999 do a[i] = i end "
            "return redis.call('lpush', KEYS[1], unpack(a))")
    assert r.eval(body, 1, "l") == 7999
    assert r.eval(body, 1, "l") == 15998
    r.delete("l")


def test_argument_errors(srv):
    r = srv.client()
    assert "Please specify at least one argument for this redis lib call" in error_of(
        r, "EVAL", "return redis.call()", 0)
    assert "Lua redis lib command arguments must be strings or integers" in error_of(
        r, "EVAL", "return redis.call('set', 'k', {})", 0)
    assert r.eval("return redis.call('echo', 3.5)", 0) == "3.5"
