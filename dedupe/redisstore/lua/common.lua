-- Prepended to every script. KEYS[1] is the namespace's key prefix "{prefix:namespace}:"; every
-- key a script touches starts with it, so all of them live on one Cluster shard. The other KEYS
-- are the keys the script knows before it runs (scriptKeys in store.go); the script names them
-- from T all the same.
local T = KEYS[1]
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

-- free ends the hold of the entity's lease holders (the events one Lease handed out) and puts
-- the entity's earliest waiting events back in the due queue at their own due times, where the
-- next Lease finds them in order.
local function free(entity)
  redis.call('DEL', T .. 'o:' .. entity)
  redis.call('ZREM', T .. 'L', entity)
  local b = T .. 'b:' .. entity
  local first = redis.call('ZRANGE', b, 0, 63, 'WITHSCORES')
  for i = 1, #first, 2 do
    redis.call('ZADD', T .. 'q', first[i + 1], first[i])
  end
  if #first > 0 then redis.call('ZREMRANGEBYRANK', b, 0, math.floor(#first / 2) - 1) end
end
