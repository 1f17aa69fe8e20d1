-- DoneAndQueue: Done for the claim, and its event queued for each of its destinations, which
-- never refuses it (the app took it already). ARGV: those of a script that queues an event
-- (queueArgs in common.lua); the destinations' bounds are not read. Returns 'ok'.
-- A destination whose queue still holds a delivery of the ID (reused after its dedupe window)
-- keeps it, untouched, and the others get the event. Its header and body are then shared (T
-- p:<id>) only by the destinations that get it, and only if no earlier event of the ID shares
-- one still (a delivery of it, in one of these queues or another, may still send or replay it):
-- else each of them holds its own copy, as the delivery of an event of one destination does.
-- The event holds the token of the call that queued it ('ac'), as Accept's: the same call run
-- again (go-redis runs a call again when its reply was lost or came later than the read timeout)
-- finds its own event, and answers 'ok' without a write, as its first run did.
local a = queueArgs()
local n = #a.queues
local p = T .. 'p:' .. a.id
local probe = {unpack(a.hashes)}
if n > 1 then probe[n + 1] = p end

local fresh, sharing = {}, n > 1 -- the destinations that get the event; whether in a shared hash
if redis.call('EXISTS', unpack(probe)) == 0 then
  for i = 1, n do fresh[i] = i end
else
  -- Only then are the tokens read, so a new event costs no read of its hashes.
  if n > 1 and redis.call('HGET', p, 'ac') == a.mine then return 'ok' end
  for i = 1, n do
    if redis.call('EXISTS', a.hashes[i]) == 0 then
      fresh[#fresh + 1] = i
    elseif redis.call('HGET', a.hashes[i], 'ac') == a.mine then
      return 'ok'
    end
  end
  sharing = #fresh > 1 and redis.call('EXISTS', p) == 0
end

local fields, shared = a.fields, nil
if sharing then
  shared = a.shared
  if #fresh < n then
    -- The shared hash names the destinations that get the event, and no other.
    local names = {}
    for j, i in ipairs(fresh) do names[j] = a.names[i] end
    shared = {unpack(a.shared)}
    for j = 1, #shared, 2 do
      if shared[j] == 'd' then shared[j + 1] = table.concat(names, ' ') end
    end
  end
elseif n > 1 then
  -- Each delivery hash holds the header and body, as an event's of one destination does.
  fields = {unpack(a.fields)}
  for j = 1, #a.shared, 2 do
    if a.shared[j] ~= 'd' then fields[#fields + 1], fields[#fields + 2] = a.shared[j], a.shared[j + 1] end
  end
end
queueEvent(a, fresh, fields, shared, a.entity ~= '' and newer(T .. 'v:' .. a.entity, a.version))
return 'ok'
