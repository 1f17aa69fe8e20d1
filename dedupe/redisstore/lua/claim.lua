-- Claim. ARGV: lease ms, entity ('' for none), version, then the dedupe keys' suffixes.
local lease, entity, version = ARGV[1], ARGV[2], ARGV[3]
local ids = {}
for i = 4, #ARGV do ids[#ids + 1] = T .. ARGV[i] end
local out = dedupeOutcome(ids)
if out then return out end
if entity ~= '' and not newer(T .. 'v:' .. entity, version) then return 'stale' end
for _, k in ipairs(ids) do redis.call('SET', k, 'c', 'NX', 'PX', lease) end
return 'claimed'
