-- List of queue Q. ARGV: 1 state, 2 where to start (a ZRANGEBYLEX bound), 3 limit, 4 most
-- members to examine, then the fields to return. Returns {resume, rows...}, a row {id,
-- values...} per event; resume is '' once the walk reached the limit or the listing's end, else
-- the bound to go on from (it examined its most). It drops members whose event expired (or was accepted again under its
-- ID): first those x says expired, at most as many as it may examine, then any it walks past.
local state, start, limit, budget = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local set = Q .. 's:' .. state

local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', Q .. 'x', '-inf', nowMs, 'LIMIT', 0, budget)
for i = 1, #expired, 256 do
  local chunk = {unpack(expired, i, math.min(i + 255, #expired))}
  redis.call('ZREM', Q .. 'x', unpack(chunk))
  for _, s in ipairs(FINAL) do redis.call('ZREM', Q .. 's:' .. s, unpack(chunk)) end
end

local out, seen = {''}, 0
while #out - 1 < limit do
  if seen >= budget then
    out[1] = start
    break
  end
  local members = redis.call('ZRANGEBYLEX', set, start, '+', 'LIMIT', 0, math.min(limit - #out + 1, budget - seen))
  if #members == 0 then break end
  for _, m in ipairs(members) do
    seen = seen + 1
    local id = string.sub(m, 17)
    local h = Q .. 'e:' .. id
    local cur = redis.call('HMGET', h, 'st', 'lx')
    if cur[1] == state and cur[2] == m then
      local row = redis.call('HMGET', h, unpack(ARGV, 5))
      table.insert(row, 1, id)
      out[#out + 1] = row
    else
      redis.call('ZREM', set, m)
    end
  end
  start = '(' .. members[#members]
end
return out
