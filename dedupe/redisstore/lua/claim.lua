-- Claim. ARGV: lease ms, entity ('' for none), version, this call's token, then the dedupe keys'
-- suffixes. A claim holds 'c' and the token of the call that made it: the same call run again
-- (go-redis runs a call again when its reply was lost) finds its own claim, and has it.
local lease, entity, version, mine = ARGV[1], ARGV[2], ARGV[3], 'c' .. ARGV[4]
local ids = {}
for i = 5, #ARGV do ids[#ids + 1] = T .. ARGV[i] end
local again = #ids > 0
for _, k in ipairs(ids) do
  if redis.call('GET', k) ~= mine then again = false end
end
if again then return 'claimed' end
local out = dedupeOutcome(ids)
if out then return out end
if entity ~= '' and not newer(T .. 'v:' .. entity, version) then return 'stale' end
for _, k in ipairs(ids) do redis.call('SET', k, mine, 'NX', 'PX', lease) end
return 'claimed'
