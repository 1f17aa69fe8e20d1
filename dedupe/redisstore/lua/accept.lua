-- Accept. ARGV: 1 event ID, 2 dedupe ttl ms, 3 claim's entity ('' for none), 4 its version,
-- 5 version ttl ms (0: for good), 6 max pending (0: no bound), 7 due µs, 8 list member,
-- 9 this call's token, 10 number k of dedupe key suffixes, 11..10+k the suffixes, then the
-- event's field/value pairs. The event holds the token of the call that accepted it ('ac', till
-- its final state): the same call run again (go-redis runs a call again when its reply was lost
-- or came later than the read timeout) finds its own event, and has accepted it.
local id, ttl, entity, version, vttl, maxPending, due, member, mine =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9]
local k = tonumber(ARGV[10])
local ids = {}
for i = 1, k do ids[i] = T .. ARGV[10 + i] end
local h = T .. 'e:' .. id
-- Its own first run left the dedupe keys done, or (without dedupe keys, or once they expired)
-- the event: only then is the hash read for the token, so a new event costs no read of it.
local out = dedupeOutcome(ids)
if out or redis.call('EXISTS', h) == 1 then
  if redis.call('HGET', h, 'ac') == mine then return 'claimed' end
  return out or 'duplicate'
end
local vk = T .. 'v:' .. entity
if entity ~= '' and not newer(vk, version) then return 'stale' end
if maxPending > 0 and redis.call('ZCARD', T .. 's:pending') >= maxPending then return 'full' end

-- The event's hash is the first write: at maxmemory (noeviction) Redis refuses a script's first
-- write that may grow memory (the caller answers 503), and would let any later one through.
redis.call('HSET', h, 'ac', mine, unpack(ARGV, 11 + k))
if entity ~= '' then
  setversion(vk, version, vttl)
  -- The delivered version expires with the accepted one.
  local wk = T .. 'w:' .. entity
  if tonumber(vttl) > 0 then redis.call('PEXPIRE', wk, vttl) else redis.call('PERSIST', wk) end
end
for _, dk in ipairs(ids) do redis.call('SET', dk, 'd', 'PX', ttl) end
-- A reused ID accepted at the same instant as its expired predecessor has the same member. A
-- final listing's members are all in x (Update adds them to both, the trims take them from all).
if redis.call('ZSCORE', T .. 'x', member) then
  redis.call('ZREM', T .. 'x', member)
  for _, s in ipairs(FINAL) do redis.call('ZREM', T .. 's:' .. s, member) end
end
redis.call('ZADD', T .. 'q', due, id)
redis.call('ZADD', T .. 's:pending', 0, member)
return 'claimed'
