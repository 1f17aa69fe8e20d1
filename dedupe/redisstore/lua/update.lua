-- Update of an event's delivery in queue Q. ARGV: 1 event ID, 2 state, 3 lease token, 4 keep ms
-- (final states), 5 due µs (Pending), then the field/value pairs to write (a final state's
-- without a due time: it drops the field).
-- Returns {'ok'}, {'not-found'}, {'lease-lost', token} or {'final', state} (unless it already
-- holds exactly this final state and these fields).
local id, state, token, keep, due = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local h = Q .. 'e:' .. id
local cur = redis.call('HMGET', h, 'st', 'tok', 'ent', 'ver', 'lx', 'p')
if not cur[1] then return {'not-found'} end
local tok = cur[2] or '0'
if tok ~= token then return {'lease-lost', tok} end
if cur[1] ~= 'pending' then
  -- The same call run again (go-redis runs a call again when its reply was lost) finds the
  -- outcome it asks for already recorded under its lease: that is success.
  local same = cur[1] == state
  for i = 6, #ARGV, 2 do
    if ARGV[i] ~= 'nxt' and redis.call('HGET', h, ARGV[i]) ~= ARGV[i + 1] then same = false end
  end
  if same then return {'ok'} end
  return {'final', cur[1]}
end
local entity, version, member = cur[3] or '', cur[4] or '0', cur[5]

-- Redis at maxmemory (noeviction) refuses a script's first write that may grow memory, and lets
-- the later ones through: so the first write takes the event off the queue, and a delivery,
-- which frees its body, is recorded even then.
redis.call('ZREM', Q .. 'q', id)
if state == 'delivered' or state == 'superseded' then
  redis.call('HDEL', h, 'nxt', 'ac', 'hdr', 'body') -- only a dead letter is replayed
elseif state ~= 'pending' then
  redis.call('HDEL', h, 'nxt', 'ac')
end
redis.call('HSET', h, unpack(ARGV, 6))
if entity ~= '' then
  redis.call('ZREM', Q .. 'b:' .. entity, id)
  local o = Q .. 'o:' .. entity
  if redis.call('SREM', o, id) == 1 and redis.call('SCARD', o) == 0 then free(entity) end
end
if state == 'pending' then
  redis.call('ZADD', Q .. 'q', due, id)
  return {'ok'}
end

redis.call('ZREM', Q .. 's:pending', member)
redis.call('ZADD', Q .. 's:' .. state, 0, member)
if state == 'delivered' and entity ~= '' then
  local wk = Q .. 'w:' .. entity
  if newer(wk, version) then
    -- It expires with the accepted version; once that has expired there is nothing to keep.
    local ttl = redis.call('PTTL', T .. 'v:' .. entity)
    if ttl == -1 then
      redis.call('SET', wk, version)
    elseif ttl > 0 then
      redis.call('SET', wk, version, 'PX', ttl)
    end
  end
end
redis.call('PEXPIRE', h, keep)
-- Headers and body shared with the event's other destinations: kept while one of its deliveries
-- may still use them.
if cur[6] then settleBody(id) end

-- x holds the final events' list members by expiry; drop from the listings those that expired.
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', Q .. 'x', nowMs + tonumber(keep), member)
-- The listing and x expire with the last of their events (no sooner than keep from now, at most
-- a slack later), so a namespace gone quiet leaves nothing behind. The slack spares most Updates
-- the writes. x outlives every listing, so a final listing's members are all in x (see Accept):
-- x is looked at only when a listing is extended, since x is never shorter than any listing (a
-- listing with members has them in x too, and x got a TTL no shorter than the listing's when
-- the listing got its own).
local ms = tonumber(keep)
local slack = math.min(math.floor(ms / 8), 60000)
if redis.call('PTTL', Q .. 's:' .. state) < ms then
  redis.call('PEXPIRE', Q .. 's:' .. state, ms + slack)
  if redis.call('PTTL', Q .. 'x') < ms + slack then redis.call('PEXPIRE', Q .. 'x', ms + 2 * slack) end
end
local expired = redis.call('ZRANGEBYSCORE', Q .. 'x', '-inf', nowMs, 'LIMIT', 0, 64)
if #expired > 0 then
  redis.call('ZREM', Q .. 'x', unpack(expired))
  for _, s in ipairs(FINAL) do redis.call('ZREM', Q .. 's:' .. s, unpack(expired)) end
end
return {'ok'}
