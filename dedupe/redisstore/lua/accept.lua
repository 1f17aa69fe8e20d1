-- Accept. ARGV: 1 event ID, 2 dedupe ttl ms, 3 claim's entity ('' for none), 4 its version,
-- 5 version ttl ms (0: for good), 6 due µs, 7 list member, 8 this call's token, 9 number k of
-- dedupe key suffixes, 10..9+k the suffixes, then the number n of destinations and n pairs: the
-- destination's queue prefix after T ('' for the default destination: the route's own keys) and
-- its max pending (0: no bound); then the number f of field/value arguments of each delivery
-- hash, those f; then (n > 1) the shared hash's field/value pairs (common.lua).
-- The event holds the token of the call that accepted it ('ac', in its delivery hash till its
-- final state, or in its shared hash): the same call run again (go-redis runs a call again when
-- its reply was lost or came later than the read timeout) finds its own event, and has accepted
-- it.
local id, ttl, entity, version, vttl, due, member, mine =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local k = tonumber(ARGV[9])
local ids = {}
for i = 1, k do ids[i] = T .. ARGV[9 + i] end
local at = 10 + k
local n = tonumber(ARGV[at])
local queues, bounds, hashes = {}, {}, {}
for i = 1, n do
  queues[i] = T .. ARGV[at + 2 * i - 1]
  bounds[i] = tonumber(ARGV[at + 2 * i])
  hashes[i] = queues[i] .. 'e:' .. id
end
at = at + 2 * n + 1
local f = tonumber(ARGV[at])
local fields = {unpack(ARGV, at + 1, at + f)}
local p = T .. 'p:' .. id
local own, probe = hashes[1], {unpack(hashes)} -- the hash that holds the token; those of the event
if n > 1 then own, probe[n + 1] = p, p end

-- Its own first run left the dedupe keys done, or (without dedupe keys, or once they expired)
-- the event: only then is the token read, so a new event costs no read of its hashes.
local out = dedupeOutcome(ids)
if out or redis.call('EXISTS', unpack(probe)) > 0 then
  if redis.call('HGET', own, 'ac') == mine then return 'claimed' end
  return out or 'duplicate'
end
local vk = T .. 'v:' .. entity
if entity ~= '' and not newer(vk, version) then return 'stale' end
for i = 1, n do
  if bounds[i] > 0 and redis.call('ZCARD', queues[i] .. 's:pending') >= bounds[i] then return 'full' end
end

-- Everything is checked: Redis keeps the writes a script made before it failed, so none is
-- made before the event is known to be accepted. The hash with the body is the first write: at
-- maxmemory (noeviction) Redis refuses a script's first write that may grow memory (the caller
-- answers 503), and would let any later one through.
if n > 1 then
  redis.call('HSET', p, 'ac', mine, unpack(ARGV, at + f + 1))
  for i = 1, n do redis.call('HSET', hashes[i], 'p', '1', unpack(fields)) end
else
  redis.call('HSET', own, 'ac', mine, unpack(fields))
end
if entity ~= '' then
  setversion(vk, version, vttl)
  -- The delivered versions expire with the accepted one.
  for i = 1, n do
    local wk = queues[i] .. 'w:' .. entity
    if tonumber(vttl) > 0 then redis.call('PEXPIRE', wk, vttl) else redis.call('PERSIST', wk) end
  end
end
for _, dk in ipairs(ids) do redis.call('SET', dk, 'd', 'PX', ttl) end
for i = 1, n do
  local q = queues[i]
  -- A reused ID accepted at the same instant as its expired predecessor has the same member. A
  -- final listing's members are all in x (Update adds them to both, the trims take them from all).
  if redis.call('ZSCORE', q .. 'x', member) then
    redis.call('ZREM', q .. 'x', member)
    for _, s in ipairs(FINAL) do redis.call('ZREM', q .. 's:' .. s, member) end
  end
  redis.call('ZADD', q .. 'q', due, id)
  redis.call('ZADD', q .. 's:pending', 0, member)
end
return 'claimed'
