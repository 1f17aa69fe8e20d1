-- Replay of an event's dead delivery in queue Q. ARGV: 1 event ID, 2 now ns, 3 now µs, 4 this
-- call's token. Returns {'ok'}, {'not-found'} or {'not-dead', state}. The replayed event keeps
-- the call's token ('rp'): the same call run again (go-redis runs a call again when its reply
-- was lost) finds its own replay done, and answers 'ok' as its first run did.
-- An ordered event ('ok', its key) that holds its key is its key's head again, due now, before
-- the events that waited behind it; one that left its key (skipped) joins it again at its tail,
-- under the route's next sequence number: due now if the key has no other event, else waiting.
local id = ARGV[1]
local h = Q .. 'e:' .. id
local cur = redis.call('HMGET', h, 'st', 'lx', 'rp', 'p', 'ok', 'hd')
if not cur[1] then return {'not-found'} end
if cur[3] == ARGV[4] then return {'ok'} end
if cur[1] ~= 'dead' then return {'not-dead', cur[1]} end
if cur[4] then
  -- Its headers and body, shared with the event's other destinations, are kept again for good.
  -- Gone (evicted or lost: a dead letter keeps them while it lasts), there is nothing to deliver.
  local p = T .. 'p:' .. id
  if redis.call('EXISTS', p) == 0 then return {'not-found'} end
  redis.call('PERSIST', p)
end
redis.call('PERSIST', h)
local due = true
local key = cur[5]
if key then
  local k = Q .. 'k:' .. key
  if cur[6] then unhold(h, key) end
  if not redis.call('ZSCORE', k, id) then
    local seq = string.format('%d', redis.call('INCR', T .. 'n'))
    redis.call('ZADD', k, seq, id)
    redis.call('HSET', h, 'sq', seq)
  end
  due = isHead(key, id)
end
redis.call('HSET', h, 'st', 'pending', 'att', '0', 'nxt', ARGV[2], 'upd', ARGV[2], 'rp', ARGV[4])
redis.call('ZREM', Q .. 's:dead', cur[2])
redis.call('ZREM', Q .. 'x', cur[2])
redis.call('ZADD', Q .. 's:pending', 0, cur[2])
if due then
  redis.call('ZADD', Q .. 'q', ARGV[3], id)
  if key then redis.call('HSET', Q .. 'K', id, key) end
else
  redis.call('HDEL', h, 'nxt') -- it waits behind its key's head
end
return {'ok'}
