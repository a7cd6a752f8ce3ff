-- Installed once in every worker's Lua state, before any script: the
-- script-facing parts of `redis` written in Lua, the error handler that
-- gives errors Redis 7.0's shape ({err=, source=, line=}), and the
-- read-only globals. `state` is private to this chunk: the engine puts
-- `redis.call` in `state.redis` while a script runs.
local state, G = ...
local redis = state.redis
local error, type, tostring, select, unpack = error, type, tostring, select, unpack
local rawget, rawset, setmetatable, getmetatable = rawget, rawset, setmetatable, getmetatable
local raw_pcall, xpcall, find, match = pcall, xpcall, string.find, string.match

local READONLY = 'Attempt to modify a readonly table'
local readonly = setmetatable({}, {__mode = 'k'})

-- The script position `from` frames up (skipping native frames and this
-- chunk's own) as '@chunk' and line, read from the position prefix that
-- error() puts on a string.
local function position(from)
  for level = from, from + 8 do
    local _, msg = raw_pcall(error, '', level)
    if type(msg) == 'string' and msg ~= '' and not find(msg, '^%[shoal%]') then
      local src, line = match(msg, '^(.-):(%d+): $')
      if src then return '@' .. src, line end
    end
  end
end

-- redis.call raises its error table through a native error (which Lua
-- sees as a userdata): the table waits in state.pending.
local function take_pending(err)
  if type(err) == 'userdata' then
    local pending = rawget(state, 'pending')
    if pending ~= nil then
      rawset(state, 'pending', nil)
      return pending
    end
  end
  return err
end

local function handler(err)
  err = take_pending(err)
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if rawget(err, 'source') == nil and not readonly[err] then
    local src, line = position(3)
    if src then
      rawset(err, 'source', src)
      rawset(err, 'line', line)
    end
  end
  return err
end

-- Runs f(a, b) protected; returns true and the result, or false and the
-- error table. The body is one closure made once (a new one per run is
-- garbage the collector pays for on every script call); runs never nest.
local run_f, run_a, run_b
local function body() return run_f(run_a, run_b) end
state.run = function(f, a, b)
  run_f, run_a, run_b = f, a, b
  local ok, result = xpcall(body, handler)
  run_f, run_a, run_b = nil, nil, nil
  return ok, result
end

-- redis.call is a native (a C function, as in Redis) the engine puts in
-- `redis` for the length of a run: a `return redis.call(...)` then keeps
-- the script's frame, which the error handler names. Outside a run it is
-- this.
local function outside_run()
  error({err = 'ERR redis.call/pcall can only be called inside a script invocation'})
end
redis.call = outside_run
state.outside_run = outside_run
-- Raises the error table `v` of a call made by the script's line that
-- called the function calling this (Redis names that line in the error).
local function raise_at_caller(v)
  local src, line = position(3)
  if src then
    rawset(v, 'source', src)
    rawset(v, 'line', line)
  end
  error(v)
end
-- redis.acl_check_cmd: true or false, or raises for an unknown command
-- (or arguments redis.call would refuse), checked by the run's
-- redis.call native when its first argument is state.acl_check.
local acl_check = state.acl_check
redis.acl_check_cmd = function(...)
  local check = rawget(redis, 'call')
  if check == outside_run then
    error({err = 'ERR redis.acl_check_cmd can only be called inside a script invocation'})
  end
  local v = check(acl_check, ...)
  if type(v) == 'table' then raise_at_caller(v) end
  return v
end

-- Redis's pcall hands back an error table's text rather than the table.
local function pack(...) return {n = select('#', ...), ...} end
-- A run stopped by SCRIPT KILL (or a shutdown) cannot be caught: the
-- hook leaves its error in state.killed and every pcall raises it again.
local function raise_if_killed()
  local killed = rawget(state, 'killed')
  if killed ~= nil then error(killed, 0) end
end

-- redis.pcall: redis.call's reply, or the error table it would raise
-- (which waits in state.pending). Written here over the run's one native
-- rather than made a native of its own: each native a run makes is
-- garbage, and a native made per run costs every script call much time.
redis.pcall = function(...)
  local call = rawget(redis, 'call')
  if call == outside_run then outside_run() end
  local ok, v = raw_pcall(call, ...)
  if ok then return v end
  raise_if_killed()
  local pending = take_pending(v)
  if pending ~= v then return pending end
  error(v, 0)
end

G.pcall = function(f, ...)
  local r = pack(raw_pcall(f, ...))
  if not r[1] then raise_if_killed() end
  if not r[1] then r[2] = take_pending(r[2]) end
  if not r[1] and type(r[2]) == 'table' and type(rawget(r[2], 'err')) == 'string' then
    return false, rawget(r[2], 'err')
  end
  return unpack(r, 1, r.n)
end

G.xpcall = function(f, h)
  local r = pack(xpcall(f, function(e) return h(take_pending(e)) end))
  if not r[1] then raise_if_killed() end
  return unpack(r, 1, r.n)
end

-- loadstring compiles text only (a binary chunk could break the VM), and
-- what it compiles sees the script globals, not the real ones.
local raw_loadstring, setfenv, byte = loadstring, setfenv, string.byte
G.loadstring = function(s, name)
  if type(s) == 'string' and byte(s, 1) == 27 then
    return nil, 'binary chunks are not allowed'
  end
  local f, err = raw_loadstring(s, name)
  if f then setfenv(f, rawget(state, 'env')) end
  return f, err
end

-- A read-only view of t: reads pass through, writes fail.
local function protect(t)
  local proxy = {}
  local meta = {__index = t, __newindex = function() error(READONLY, 2) end}
  local shown = setmetatable({}, {__index = meta, __newindex = function() error(READONLY, 2) end})
  readonly[shown] = true
  meta.__metatable = shown
  setmetatable(proxy, meta)
  readonly[proxy] = true
  return proxy
end

G.setmetatable = function(t, mt)
  if readonly[t] then error(READONLY, 2) end
  return setmetatable(t, mt)
end
G.rawset = function(t, k, v)
  if readonly[t] then error(READONLY, 2) end
  return rawset(t, k, v)
end

for _, name in ipairs({'redis', 'cjson', 'cmsgpack', 'bit', 'struct', 'string', 'math', 'table', 'coroutine'}) do
  if rawget(G, name) ~= nil then rawset(G, name, protect(rawget(G, name))) end
end

-- The globals scripts see: nothing may be added or replaced, and reading
-- an unknown name is an error (so a typo does not read nil).
local env = {}
local env_meta = {
  __index = function(_, k)
    local v = rawget(G, k)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error(READONLY, 2) end,
}
local env_shown = setmetatable({}, {__index = env_meta, __newindex = function() error(READONLY, 2) end})
readonly[env_shown] = true
env_meta.__metatable = env_shown
setmetatable(env, env_meta)
readonly[env] = true
rawset(G, '_G', env)
state.env = env
state.protect = protect

-- Functions (FUNCTION LOAD). While a library's code runs, state.loading
-- collects what it registers, and its globals are only the library API:
-- `redis` with register_function, log and the constants. Later, when its
-- functions run, the same globals are the script globals.
local FLAGS = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}
local lower, ipairs, pairs = string.lower, ipairs, pairs

local function reg_error(msg) error({err = 'ERR ' .. msg}) end

local function register_function(...)
  local loading = rawget(state, 'loading')
  if not loading then
    reg_error('redis.register_function can only be called on FUNCTION LOAD command')
  end
  local n = select('#', ...)
  local name, callback, desc, flags
  if n == 1 then
    local t = ...
    if type(t) ~= 'table' then
      reg_error('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
    end
    for k, v in pairs(t) do
      if type(k) ~= 'string' then
        reg_error('named argument key given to redis.register_function is not a string')
      end
      local key = lower(k)
      if key == 'function_name' then
        if type(v) ~= 'string' then reg_error('function_name argument given to redis.register_function must be a string') end
        name = v
      elseif key == 'description' then
        if type(v) ~= 'string' then reg_error('description argument given to redis.register_function must be a string') end
        desc = v
      elseif key == 'callback' then
        if type(v) ~= 'function' then reg_error('callback argument given to redis.register_function must be a function') end
        callback = v
      elseif key == 'flags' then
        if type(v) ~= 'table' then reg_error('flags argument to redis.register_function must be a table representing function flags') end
        flags = {}
        for _, f in pairs(v) do
          if type(f) ~= 'string' or not FLAGS[f] then reg_error('unknown flag given') end
          flags[#flags + 1] = f
        end
      else
        reg_error('unknown argument given to redis.register_function')
      end
    end
    if name == nil then reg_error('redis.register_function must get a function name argument') end
    if callback == nil then reg_error('redis.register_function must get a callback argument') end
  elseif n == 2 then
    name, callback = ...
    if type(name) ~= 'string' then reg_error('first argument to redis.register_function must be a string') end
    if type(callback) ~= 'function' then reg_error('second argument to redis.register_function must be a function') end
  else
    reg_error('wrong number of arguments to redis.register_function')
  end
  if not find(name, '^[%w_]+$') then
    reg_error('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  for _, r in ipairs(loading) do
    if r.name == name then reg_error('Function already exists in the library') end
  end
  loading[#loading + 1] = {name = name, callback = callback, description = desc, flags = flags or {}}
end

-- A read-only view of t where reading a missing name is an error too.
local function strict(t)
  local proxy = {}
  local meta = {
    __index = function(_, k)
      local v = t[k]
      if v == nil then
        error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
      end
      return v
    end,
    __newindex = function() error(READONLY, 2) end,
  }
  local shown = setmetatable({}, {__index = meta, __newindex = function() error(READONLY, 2) end})
  readonly[shown] = true
  meta.__metatable = shown
  setmetatable(proxy, meta)
  readonly[proxy] = true
  return proxy
end

local library_redis = {register_function = register_function, log = redis.log}
for _, k in ipairs({'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING', 'REDIS_VERSION', 'REDIS_VERSION_NUM'}) do
  library_redis[k] = redis[k]
end
local library_api = {redis = strict(library_redis)}

local fenv = {}
local fenv_meta = {
  __index = function(_, k)
    local v
    if rawget(state, 'loading') then v = rawget(library_api, k) else v = rawget(G, k) end
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error(READONLY, 2) end,
}
local fenv_shown = setmetatable({}, {__index = fenv_meta, __newindex = function() error(READONLY, 2) end})
readonly[fenv_shown] = true
fenv_meta.__metatable = fenv_shown
setmetatable(fenv, fenv_meta)
readonly[fenv] = true
state.fenv = fenv
