-- Held keys of queue Q (ordered queues, common.lua). ARGV: 1 the ZRANGEBYLEX bound to start from,
-- 2 limit. Returns for each held key, in key order: the key, its head's ID, since when it holds
-- the key (ns, base 10) and the number of events waiting behind it.
local out = {}
for _, key in ipairs(redis.call('ZRANGEBYLEX', Q .. 'H', ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))) do
  local k = Q .. 'k:' .. key
  local head = redis.call('ZRANGE', k, 0, 0)[1] or ''
  local since = ''
  if head ~= '' then since = redis.call('HGET', Q .. 'e:' .. head, 'hd') or '' end
  out[#out + 1] = {key, head, since, math.max(redis.call('ZCARD', k) - 1, 0)}
end
return out
