-- Accept. ARGV: those of a script that queues an event (queueArgs in common.lua).
-- The event holds the token of the call that accepted it ('ac', in its delivery hash till its
-- final state, or in its shared hash): the same call run again (go-redis runs a call again when
-- its reply was lost or came later than the read timeout) finds its own event, and has accepted
-- it.
local a = queueArgs()
local n = #a.queues
local p = T .. 'p:' .. a.id
local own, probe = a.hashes[1], {unpack(a.hashes)} -- the hash that holds the token; those of the event
-- The shared body of an earlier event of the ID, still held by deliveries of destinations this
-- one may not name: the ID is still queued, so this is a duplicate.
probe[n + 1] = p
if n > 1 then own = p end

-- Its own first run left the dedupe keys done, or (without dedupe keys, or once they expired)
-- the event: only then is the token read, so a new event costs no read of its hashes.
local out = dedupeOutcome(a.ids)
if out or redis.call('EXISTS', unpack(probe)) > 0 then
  if redis.call('HGET', own, 'ac') == a.mine then return 'claimed' end
  return out or 'duplicate'
end
if a.entity ~= '' and not newer(T .. 'v:' .. a.entity, a.version) then return 'stale' end
local all = {}
for i = 1, n do
  if a.bounds[i] > 0 and redis.call('ZCARD', a.queues[i] .. 's:pending') >= a.bounds[i] then return 'full' end
  all[i] = i
end
queueEvent(a, all, a.fields, a.shared, a.entity ~= '')
return 'claimed'
