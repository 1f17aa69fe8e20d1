-- Lease. ARGV: 1 now µs, 2 n, 3 lease end µs, 4 lease end ns, 5 entries to examine at most,
-- 6 body bytes after which to stop, 7 this run's token. Returns {cut, fields...}: cut is 1 when
-- it stopped on the entries to examine with fewer than n events handed out, then each leased
-- event's fields (HGETALL).
local now, n, untilUs, untilNs = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local budget, maxBytes, run = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local q = T .. 'q'

-- The same call run again (go-redis runs a call again when its reply was lost) hands out what
-- its first run leased: those events are due at the lease end and marked with the call's token.
local again = {1}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', q, untilUs, untilUs, 'LIMIT', 0, 4 * n)) do
  local h = T .. 'e:' .. id
  if redis.call('HGET', h, 'ln') == run then again[#again + 1] = redis.call('HGETALL', h) end
end
if #again > 1 then return again end

-- Entities whose holder's lease lapsed are free again.
for _, entity in ipairs(redis.call('ZRANGEBYSCORE', T .. 'L', '-inf', ARGV[1], 'LIMIT', 0, budget)) do
  free(entity)
end

-- The due entries are read a few more than still wanted at a time, not the whole budget at once:
-- most runs hand out the first n, and each entry read costs Redis its score's formatting.
local out, bytes, mine, examined, left = {0}, 0, {}, 0, 0
local function wanted() return #out - 1 < n and bytes < maxBytes end
while wanted() and examined < budget do
  local chunk = math.min(n - (#out - 1) + 8, budget - examined)
  local due = redis.call('ZRANGEBYSCORE', q, '-inf', ARGV[1], 'LIMIT', left, chunk)
  for _, id in ipairs(due) do
    if not wanted() then break end
    examined = examined + 1
    local h = T .. 'e:' .. id
    local cur = redis.call('HMGET', h, 'st', 'ent', 'bb')
    if not cur[1] then
      -- Its hash is missing, which the scripts never leave so: Redis lost it, or it has not come
      -- back yet (a restore in progress). Leave the entry, handed out once the hash is there.
      left = left + 1
    elseif cur[1] ~= 'pending' then
      redis.call('ZREM', q, id) -- cannot happen while the scripts keep the queue; never hand it out
    else
      local entity = cur[2] or ''
      local held = false
      if entity ~= '' and not mine[entity] then
        local ends = redis.call('ZSCORE', T .. 'L', entity)
        held = ends and tonumber(ends) > now
      end
      if held then
        -- Events of the entity are out on a live lease, handed out by an earlier call: this one
        -- waits, off the queue, until their Updates or the lapse of their lease free the entity.
        local score = redis.call('ZSCORE', q, id)
        redis.call('ZREM', q, id)
        redis.call('ZADD', T .. 'b:' .. entity, score, id)
      else
        -- Off the queue first, a write that cannot grow memory: Redis at maxmemory (noeviction)
        -- refuses a script's first write that may, and lets the later ones through.
        redis.call('ZREM', q, id)
        if entity ~= '' then
          local o = T .. 'o:' .. entity
          if not mine[entity] then
            redis.call('DEL', o) -- holders whose lease lapsed
            redis.call('ZADD', T .. 'L', untilUs, entity)
            mine[entity] = true
          end
          redis.call('SADD', o, id)
        end
        redis.call('HINCRBY', h, 'tok', 1)
        redis.call('HSET', h, 'nxt', untilNs, 'ln', run)
        redis.call('ZADD', q, untilUs, id)
        out[#out + 1] = redis.call('HGETALL', h)
        bytes = bytes + tonumber(cur[3] or '0')
      end
    end
  end
  if #due < chunk then break end -- nothing more is due
end
if examined >= budget and wanted() then out[1] = 1 end
return out
