-- Prepended to every script. KEYS[1] is the key prefix Q of the queue the script works on: the
-- route's tag T = "{prefix:route}:" for the ledger's scripts and for the route's default
-- destination, T .. '@' .. name .. ':' for a named destination's queue (Store.queue in store.go).
-- T is Q's start up to its first '}:' (neither the prefix nor the route holds a brace, escaped).
-- Every key a script touches starts with T, so all of them live on one Cluster shard. The other
-- KEYS are the keys the script knows before it runs (scriptKeys in store.go); the script names
-- them from Q and T all the same.
local Q = KEYS[1]
local T = string.match(Q, '^[^}]*}:')
local FINAL = {'delivered', 'dead', 'superseded'}

-- cmpint compares two base-10 int64s given as canonical strings (as Go's FormatInt writes
-- them): -1, 0 or 1. Lua's numbers are doubles, which cannot tell nanosecond versions apart.
local function cmpint(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then
    if na then return -1 end
    return 1
  end
  if na then
    a, b = string.sub(b, 2), string.sub(a, 2)
  end
  if a == b then return 0 end
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  if a < b then return -1 end
  return 1
end

-- newer says whether version is newer than the one stored at key k (none: it is).
local function newer(k, version)
  local stored = redis.call('GET', k)
  return not stored or cmpint(version, stored) > 0
end

-- setversion writes version at k for ttl ms, or for good when ttl is 0.
local function setversion(k, version, ttl)
  if tonumber(ttl) > 0 then
    redis.call('SET', k, version, 'PX', ttl)
  else
    redis.call('SET', k, version)
  end
end

-- dedupeOutcome is what the dedupe keys hold: 'in-flight' if any is claimed, else 'duplicate' if
-- any is done, else nil.
local function dedupeOutcome(ids)
  local done = false
  for _, k in ipairs(ids) do
    local v = redis.call('GET', k)
    if v and string.sub(v, 1, 1) == 'c' then return 'in-flight' end
    if v == 'd' then done = true end
  end
  if done then return 'duplicate' end
  return nil
end

-- free ends the hold, in queue Q, of the entity's lease holders (the events one Lease handed
-- out) and puts the entity's earliest waiting events back in the due queue at their own due
-- times, where the next Lease finds them in order.
local function free(entity)
  redis.call('DEL', Q .. 'o:' .. entity)
  redis.call('ZREM', Q .. 'L', entity)
  local b = Q .. 'b:' .. entity
  local first = redis.call('ZRANGE', b, 0, 63, 'WITHSCORES')
  for i = 1, #first, 2 do
    redis.call('ZADD', Q .. 'q', first[i + 1], first[i])
  end
  if #first > 0 then redis.call('ZREMRANGEBYRANK', b, 0, math.floor(#first / 2) - 1) end
end

-- An event queued for several destinations keeps its headers and body once, in its shared hash
-- T p:<id> ('hdr', 'body'), with the names of its destinations ('d', space-separated) and the
-- token of the call that accepted it ('ac'); each destination's delivery hash (delivery) holds the
-- rest, and 'p' = '1' to say so. An event queued for one destination keeps everything in its
-- delivery hash, as every event did before routes had several destinations.

-- delivery is the key of event id's delivery hash in the queue of the route's destination name.
local function delivery(name, id)
  if name == 'default' then return T .. 'e:' .. id end
  return T .. '@' .. name .. ':e:' .. id
end

-- withBody appends to f, the fields of event id's delivery hash, the event's headers and body
-- from its shared hash when the delivery hash's field 'p' (shared) is set; nil when they are gone.
local function withBody(f, id, shared)
  if not shared then return f end
  local b = redis.call('HMGET', T .. 'p:' .. id, 'hdr', 'body')
  if not b[1] then return nil end
  f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'hdr', b[1], 'body', b[2]
  return f
end

-- settleBody recomputes, from the state of each of event id's deliveries (never from a count),
-- how long its shared hash is kept: for good while one of them is Pending; until the latest
-- expiry of the Dead ones when none is, so a dead letter keeps its body for replay; not at all
-- once each is Delivered or Superseded, or expired. Every final delivery has a TTL, so the
-- event's last final Update leaves nothing of it without one.
local function settleBody(id)
  local p = T .. 'p:' .. id
  local names = redis.call('HGET', p, 'd')
  if not names then return end
  local last = 0
  for name in string.gmatch(names, '%S+') do
    local h = delivery(name, id)
    local st = redis.call('HGET', h, 'st')
    if st == 'dead' then
      local ttl = redis.call('PTTL', h)
      if ttl == -1 then st = 'pending' else last = math.max(last, ttl) end
    end
    if st == 'pending' then
      redis.call('PERSIST', p)
      return
    end
  end
  if last > 0 then
    redis.call('PEXPIRE', p, last)
  else
    redis.call('DEL', p)
  end
end
