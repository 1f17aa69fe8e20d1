-- List. ARGV: 1 state, 2 where to start (a ZRANGEBYLEX bound), 3 limit, 4 most members to
-- examine, then the fields to return. Returns {id, values...} per event; drops members whose event
-- expired (or was accepted again under its ID) as it walks past them.
local state, start, limit, budget = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local set = T .. 's:' .. state
local out, seen = {}, 0
while #out < limit and seen < budget do
  local members = redis.call('ZRANGEBYLEX', set, start, '+', 'LIMIT', 0, limit - #out)
  if #members == 0 then break end
  for _, m in ipairs(members) do
    seen = seen + 1
    local id = string.sub(m, 17)
    local h = T .. 'e:' .. id
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
