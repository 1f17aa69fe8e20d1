-- Lease. ARGV: 1 now µs, 2 n, 3 lease end µs, 4 lease end ns, 5 entries to examine at most,
-- 6 body bytes after which to stop, 7 this run's token. Returns {cut, gone, fields...}: cut is 1
-- when it stopped on the entries to examine with fewer than n events handed out, gone the number
-- of queue entries of gone events it dropped, then each leased event's fields (HGETALL).
local now, n, untilUs, untilNs = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local budget, maxBytes, run = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local q = Q .. 'q'

-- The same call run again (go-redis runs a call again when its reply was lost) hands out what
-- its first run leased: those events are due at the lease end and marked with the call's token;
-- and reports the gone events' entries it dropped, kept under the token (Q g:<token>) for that.
local again = {1, tonumber(redis.call('GET', Q .. 'g:' .. run) or '0')}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', q, untilUs, untilUs, 'LIMIT', 0, 4 * n)) do
  local h = Q .. 'e:' .. id
  local mark = redis.call('HMGET', h, 'ln', 'p')
  if mark[1] == run then
    local f = withBody(redis.call('HGETALL', h), id, mark[2])
    if f then again[#again + 1] = f end
  end
end
if #again > 2 or again[2] > 0 then return again end

-- Entities whose holder's lease lapsed are free again.
for _, entity in ipairs(redis.call('ZRANGEBYSCORE', Q .. 'L', '-inf', ARGV[1], 'LIMIT', 0, budget)) do
  free(entity)
end

-- The due entries are read a few more than still wanted at a time, not the whole budget at once:
-- most runs hand out the first n, and each entry read costs Redis its score's formatting.
local out, bytes, mine, examined, left, gone = {0, 0}, 0, {}, 0, 0, 0
local took = false -- whether this run handed out an event yet
local moved = {} -- the others handed out, due again at the lease end (one ZADD once all are read)
local function wanted() return #out - 2 < n and bytes < maxBytes end
while wanted() and examined < budget do
  local chunk = math.min(n - (#out - 2) + 8, budget - examined)
  local due = redis.call('ZRANGEBYSCORE', q, '-inf', ARGV[1], 'LIMIT', left, chunk)
  for _, id in ipairs(due) do
    if not wanted() then break end
    examined = examined + 1
    local h = Q .. 'e:' .. id
    -- Only what decides whether it goes out: an entry may be a held entity's, whose body (it
    -- may be large, and the run long) this call has no use for.
    local cur = redis.call('HMGET', h, 'st', 'ent', 'bb', 'tok', 'p')
    if not cur[1] and redis.call('EXISTS', h) == 0 then
      -- Its hash is gone, which the scripts never leave so: Redis evicted or lost it, or someone
      -- deleted it. Nothing is left to deliver; kept, the entry would be met by every Lease.
      -- An ordered queue's head releases its key (leaveGone).
      redis.call('ZREM', q, id)
      leaveGone(id, nil, ARGV[1])
      gone = gone + 1
    elseif cur[1] == 'pending' and cur[5] and redis.call('EXISTS', T .. 'p:' .. id) == 0 then
      -- Its shared headers and body are gone (as above): so is the event, here. Its delivery
      -- hash goes too, so that the walk below drops its member of the Pending listing.
      local key = redis.call('HGET', h, 'ok')
      redis.call('ZREM', q, id)
      redis.call('DEL', h)
      if key then leaveGone(id, key, ARGV[1]) end
      gone = gone + 1
    elseif not cur[1] then
      left = left + 1 -- a hash without a state, which no script writes: leave it be
    elseif cur[1] ~= 'pending' then
      redis.call('ZREM', q, id) -- cannot happen while the scripts keep the queue; never hand it out
    else
      local entity = cur[2] or ''
      local held = false
      if entity ~= '' and not mine[entity] then
        local ends = redis.call('ZSCORE', Q .. 'L', entity)
        held = ends and tonumber(ends) > now
      end
      if held then
        -- Events of the entity are out on a live lease, handed out by an earlier call: this one
        -- waits, off the queue, until their Updates or the lapse of their lease free the entity.
        local score = redis.call('ZSCORE', q, id)
        redis.call('ZREM', q, id)
        redis.call('ZADD', Q .. 'b:' .. entity, score, id)
      else
        -- The first one off the queue first, a write that cannot grow memory: Redis at maxmemory
        -- (noeviction) refuses a script's first write that may, and lets the later ones through.
        -- It is back at the lease end at once: Redis keeps the writes of a script that fails
        -- later, and an event off the queue is never handed out again. The others' entries stay
        -- among the due ones until the ZADD below moves them all.
        if not took then
          redis.call('ZREM', q, id)
          redis.call('ZADD', q, untilUs, id)
          took = true
        else
          left = left + 1
          moved[#moved + 1] = id
        end
        if entity ~= '' then
          local o = Q .. 'o:' .. entity
          if not mine[entity] then
            redis.call('DEL', o) -- holders whose lease lapsed
            redis.call('ZADD', Q .. 'L', untilUs, entity)
            mine[entity] = true
          end
          redis.call('SADD', o, id)
        end
        local tok = string.format('%d', tonumber(cur[4] or '0') + 1)
        redis.call('HSET', h, 'tok', tok, 'nxt', untilNs, 'ln', run)
        out[#out + 1] = withBody(redis.call('HGETALL', h), id, cur[5])
        bytes = bytes + tonumber(cur[3] or '0')
      end
    end
  end
  if #due < chunk then break end -- nothing more is due
end
if #moved > 0 then
  local args = {}
  for i, id in ipairs(moved) do args[2 * i - 1], args[2 * i] = untilUs, id end
  redis.call('ZADD', q, unpack(args))
end
if examined >= budget and wanted() then out[1] = 1 end
out[2] = gone
if gone > 0 then redis.call('SET', Q .. 'g:' .. run, gone, 'PX', 60000) end

-- A gone event's member in the Pending listing would count in Pending and max_pending for good.
-- Once Lease has met a gone event, it walks the listing, as many members per run as it may
-- examine, from where the last run stopped, and drops the members of gone events (their ID's
-- hash is gone, or is a later event's, accepted again under the ID). Q z holds the
-- walk: '1' if gone events were met since it began (their members may lie behind it: walk the
-- listing once more after its end) or '0', then the ZRANGEBYLEX bound it goes on from.
local walk = redis.call('GET', Q .. 'z')
if gone > 0 then
  if walk then walk = '1' .. string.sub(walk, 2) else walk = '0-' end
end
if walk then
  local p = Q .. 's:pending'
  local members = redis.call('ZRANGEBYLEX', p, string.sub(walk, 2), '+', 'LIMIT', 0, budget)
  for _, m in ipairs(members) do
    -- Gone, or its ID accepted again since (the new event's member is another): as List does.
    if redis.call('HGET', Q .. 'e:' .. string.sub(m, 17), 'lx') ~= m then redis.call('ZREM', p, m) end
  end
  if #members == budget then
    redis.call('SET', Q .. 'z', string.sub(walk, 1, 1) .. '(' .. members[#members])
  elseif string.sub(walk, 1, 1) == '1' then
    redis.call('SET', Q .. 'z', '0-')
  else
    redis.call('DEL', Q .. 'z')
  end
end
return out
