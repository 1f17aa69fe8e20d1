-- Update of an event's delivery in queue Q. ARGV: 1 event ID, 2 state, 3 lease token, 4 keep ms
-- (final states), 5 due µs (Pending) or now µs (final states: the next of an ordered event's key
-- is due then), 6 '1' if a Dead ordered head holds its key (OnDead Hold), then the field/value
-- pairs to write (a final state's without a due time: it drops the field).
-- Returns {'ok'}, {'not-found'}, {'lease-lost', token} or {'final', state} (unless it already
-- holds exactly this final state and these fields).
local id, state, token, keep, due = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local h = Q .. 'e:' .. id
local cur = redis.call('HMGET', h, 'st', 'tok', 'ent', 'ver', 'lx', 'p', 'ok')
if not cur[1] then return {'not-found'} end
local tok = cur[2] or '0'
if tok ~= token then return {'lease-lost', tok} end
if cur[1] ~= 'pending' then
  -- The same call run again (go-redis runs a call again when its reply was lost) finds the
  -- outcome it asks for already recorded under its lease: that is success.
  local same = cur[1] == state
  for i = 7, #ARGV, 2 do
    if ARGV[i] ~= 'nxt' and redis.call('HGET', h, ARGV[i]) ~= ARGV[i + 1] then same = false end
  end
  if same then return {'ok'} end
  return {'final', cur[1]}
end
local entity, version, member, key = cur[3] or '', cur[4] or '0', cur[5], cur[7]
-- An ordered event is its key's head, unless it waits behind it (an Update of one never leased).
local head = key and isHead(key, id)

-- Redis at maxmemory (noeviction) refuses a script's first write that may grow memory, and lets
-- the later ones through: so the first write takes the event off the queue, and a delivery,
-- which frees its body, is recorded even then.
redis.call('ZREM', Q .. 'q', id)
if state == 'delivered' or state == 'superseded' then
  redis.call('HDEL', h, 'nxt', 'ac', 'hdr', 'body') -- only a dead letter is replayed
elseif state ~= 'pending' then
  redis.call('HDEL', h, 'nxt', 'ac')
end
redis.call('HSET', h, unpack(ARGV, 7))
if entity ~= '' then
  redis.call('ZREM', Q .. 'b:' .. entity, id)
  local o = Q .. 'o:' .. entity
  if redis.call('SREM', o, id) == 1 and redis.call('SCARD', o) == 0 then free(entity) end
end
if state == 'pending' then
  if key and not head then
    redis.call('HDEL', h, 'nxt') -- it waits behind its key's head
  else
    redis.call('ZADD', Q .. 'q', due, id)
  end
  return {'ok'}
end

redis.call('ZREM', Q .. 's:pending', member)
if key and head and state == 'dead' and ARGV[6] == '1' then
  -- A dead head that holds its key: the events behind it wait until it is replayed or skipped
  -- (skip.lua). It never expires (an expiry would release its key unseen), so its shared body is
  -- kept (settleBody: a Dead delivery without a TTL), and it is not in x.
  redis.call('HSET', h, 'hd', due .. '000') -- since when, ns
  redis.call('ZADD', Q .. 'H', 0, key)
  redis.call('ZADD', Q .. 's:dead', 0, member)
  keepHeldListed()
  if cur[6] then settleBody(id) end
  return {'ok'}
end
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

listFinal(state, member, keep)
if key then leaveKey(key, id, due) end
return {'ok'}
