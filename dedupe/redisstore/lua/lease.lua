-- Lease. ARGV: 1 now µs, 2 n, 3 lease end µs, 4 lease end ns, 5 entries to examine at most,
-- 6 body bytes after which to stop. Returns each leased event's fields (HGETALL).
local now, n, untilUs, untilNs = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local budget, maxBytes = tonumber(ARGV[5]), tonumber(ARGV[6])
local q = T .. 'q'

-- Entities whose holder's lease lapsed are free again.
for _, entity in ipairs(redis.call('ZRANGEBYSCORE', T .. 'L', '-inf', ARGV[1], 'LIMIT', 0, budget)) do
  free(entity)
end

local due = redis.call('ZRANGEBYSCORE', q, '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, budget)
local out, bytes = {}, 0
for i = 1, #due, 2 do
  if #out >= n or bytes >= maxBytes then break end
  local id, score = due[i], due[i + 1]
  local h = T .. 'e:' .. id
  local cur = redis.call('HMGET', h, 'st', 'ent', 'bb')
  if cur[1] ~= 'pending' then
    redis.call('ZREM', q, id) -- cannot happen while the scripts keep the queue; never hand it out
  else
    local entity = cur[2] or ''
    local held = false
    if entity ~= '' then
      local holder = redis.call('HGET', T .. 'l', entity)
      local ends = redis.call('ZSCORE', T .. 'L', entity)
      held = holder and holder ~= id and ends and tonumber(ends) > now
    end
    if held then
      -- Another event of the entity is out on a live lease: this one waits, off the queue, until
      -- that holder's Update or lapse frees the entity (free).
      redis.call('ZREM', q, id)
      redis.call('ZADD', T .. 'b:' .. entity, score, id)
    else
      redis.call('HINCRBY', h, 'tok', 1)
      redis.call('HSET', h, 'nxt', untilNs)
      redis.call('ZADD', q, untilUs, id)
      if entity ~= '' then
        redis.call('HSET', T .. 'l', entity, id)
        redis.call('ZADD', T .. 'L', untilUs, entity)
      end
      out[#out + 1] = redis.call('HGETALL', h)
      bytes = bytes + tonumber(cur[3] or '0')
    end
  end
end
return out
