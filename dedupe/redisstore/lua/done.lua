-- Done. ARGV: dedupe ttl ms, entity ('' for none), version, version ttl ms (0: for good), then the
-- dedupe keys' suffixes. A done record replaces the claim (same key).
local ttl, entity, version, vttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
for i = 5, #ARGV do redis.call('SET', T .. ARGV[i], 'd', 'PX', ttl) end
if entity ~= '' then
  local vk = T .. 'v:' .. entity
  if newer(vk, version) then setversion(vk, version, vttl) end
end
return 'ok'
