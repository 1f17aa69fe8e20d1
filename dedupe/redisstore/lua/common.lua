-- Prepended to every script. KEYS[1] is the key prefix Q of the queue the script works on: the
-- route's tag T = "{prefix:route}:" for the ledger's scripts and for the route's default
-- destination, T .. '@' .. name .. ':' for a named destination's queue (Store.queue in store.go).
-- T is Q's start up to its first '}:' (neither the prefix nor the route holds a brace, escaped).
-- Every key a script touches starts with T, so all of them live on one Cluster shard. The other
-- KEYS are the keys the script knows before it runs (scriptKeys in store.go); the script names
-- them from Q and T all the same.
local Q = KEYS[1]
local T = string.match(Q, '^[^}]*}:')
local FINAL = {'delivered', 'dead', 'superseded'}

-- cmpint compares two base-10 int64s given as canonical strings (as Go's FormatInt writes
-- them): -1, 0 or 1. Lua's numbers are doubles, which cannot tell nanosecond versions apart.
local function cmpint(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then
    if na then return -1 end
    return 1
  end
  if na then
    a, b = string.sub(b, 2), string.sub(a, 2)
  end
  if a == b then return 0 end
  if #a ~= #b then
    if #a < #b then return -1 end
    return 1
  end
  if a < b then return -1 end
  return 1
end

-- newer says whether version is newer than the one stored at key k (none: it is).
local function newer(k, version)
  local stored = redis.call('GET', k)
  return not stored or cmpint(version, stored) > 0
end

-- setversion writes version at k for ttl ms, or for good when ttl is 0.
local function setversion(k, version, ttl)
  if tonumber(ttl) > 0 then
    redis.call('SET', k, version, 'PX', ttl)
  else
    redis.call('SET', k, version)
  end
end

-- dedupeOutcome is what the dedupe keys hold: 'in-flight' if any is claimed, else 'duplicate' if
-- any is done, else nil.
local function dedupeOutcome(ids)
  local done = false
  for _, k in ipairs(ids) do
    local v = redis.call('GET', k)
    if v and string.sub(v, 1, 1) == 'c' then return 'in-flight' end
    if v == 'd' then done = true end
  end
  if done then return 'duplicate' end
  return nil
end

-- free ends the hold, in queue Q, of the entity's lease holders (the events one Lease handed
-- out) and puts the entity's earliest waiting events back in the due queue at their own due
-- times, where the next Lease finds them in order.
local function free(entity)
  redis.call('DEL', Q .. 'o:' .. entity)
  redis.call('ZREM', Q .. 'L', entity)
  local b = Q .. 'b:' .. entity
  local first = redis.call('ZRANGE', b, 0, 63, 'WITHSCORES')
  for i = 1, #first, 2 do
    redis.call('ZADD', Q .. 'q', first[i + 1], first[i])
  end
  if #first > 0 then redis.call('ZREMRANGEBYRANK', b, 0, math.floor(#first / 2) - 1) end
end

-- An event queued for several destinations keeps its headers and body once, in its shared hash
-- T p:<id> ('hdr', 'body'), with the names of its destinations ('d', space-separated) and the
-- token of the call that accepted it ('ac'); each destination's delivery hash (delivery) holds the
-- rest, and 'p' = '1' to say so. An event queued for one destination keeps everything in its
-- delivery hash, as every event did before routes had several destinations.

-- delivery is the key of event id's delivery hash in the queue of the route's destination name.
local function delivery(name, id)
  if name == 'default' then return T .. 'e:' .. id end
  return T .. '@' .. name .. ':e:' .. id
end

-- withBody appends to f, the fields of event id's delivery hash, the event's headers and body
-- from its shared hash when the delivery hash's field 'p' (shared) is set; nil when they are gone.
local function withBody(f, id, shared)
  if not shared then return f end
  local b = redis.call('HMGET', T .. 'p:' .. id, 'hdr', 'body')
  if not b[1] then return nil end
  f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'hdr', b[1], 'body', b[2]
  return f
end

-- settleBody recomputes, from the state of each of event id's deliveries (never from a count),
-- how long its shared hash is kept: for good while one of them is Pending; until the latest
-- expiry of the Dead ones when none is, so a dead letter keeps its body for replay; not at all
-- once each is Delivered or Superseded, or expired. Every final delivery has a TTL, so the
-- event's last final Update leaves nothing of it without one. A delivery hash of a destination
-- it names that does not share the body ('p') is a later event's, queued under the ID by
-- DoneAndQueue once this one's delivery there had expired, with a body of its own: it is not
-- one of this event's deliveries.
local function settleBody(id)
  local p = T .. 'p:' .. id
  local names = redis.call('HGET', p, 'd')
  if not names then return end
  local last = 0
  for name in string.gmatch(names, '%S+') do
    local h = delivery(name, id)
    local cur = redis.call('HMGET', h, 'st', 'p')
    local st = cur[2] and cur[1]
    if st == 'dead' then
      local ttl = redis.call('PTTL', h)
      if ttl == -1 then st = 'pending' else last = math.max(last, ttl) end
    end
    if st == 'pending' then
      redis.call('PERSIST', p)
      return
    end
  end
  if last > 0 then
    redis.call('PEXPIRE', p, last)
  else
    redis.call('DEL', p)
  end
end

-- The scripts that queue an event, accept.lua and doneandqueue.lua, take the same arguments
-- (acceptCall in outbox.go). ARGV: 1 event ID, 2 dedupe ttl ms, 3 claim's entity ('' for none),
-- 4 its version, 5 version ttl ms (0: for good), 6 due µs, 7 list member, 8 this call's token,
-- 9 number k of dedupe key suffixes, 10..9+k the suffixes, then the number n of destinations and
-- n triples: the destination's queue prefix after T ('' for the default destination: the route's
-- own keys), its max pending (0: no bound) and the event's order key there ('' for none); then the number f of field/value arguments of each
-- delivery hash, those f; then (n > 1) the shared hash's field/value pairs ('d', the names of the
-- n destinations, then 'hdr' and 'body': sharedFields in event.go). With one destination the
-- delivery hash's fields hold the header and body; with several they do not.
-- queueArgs reads them: the dedupe keys (ids), and for each destination i its queue prefix
-- (queues[i]), name (names[i]), bound (bounds[i]), order key (keys[i]) and delivery hash
-- (hashes[i]).
local function queueArgs()
  local a = {id = ARGV[1], ttl = ARGV[2], entity = ARGV[3], version = ARGV[4], vttl = ARGV[5],
    due = ARGV[6], member = ARGV[7], mine = ARGV[8], ids = {}, queues = {}, names = {}, bounds = {}, keys = {}, hashes = {}}
  local k = tonumber(ARGV[9])
  for i = 1, k do a.ids[i] = T .. ARGV[9 + i] end
  local at = 10 + k
  local n = tonumber(ARGV[at])
  for i = 1, n do
    local qp = ARGV[at + 3 * i - 2]
    a.queues[i] = T .. qp
    a.names[i] = 'default'
    if qp ~= '' then a.names[i] = string.sub(qp, 2, -2) end -- '@' .. name .. ':'
    a.bounds[i] = tonumber(ARGV[at + 3 * i - 1])
    a.keys[i] = ARGV[at + 3 * i]
    a.hashes[i] = a.queues[i] .. 'e:' .. a.id
  end
  at = at + 3 * n + 1
  local f = tonumber(ARGV[at])
  a.fields = {unpack(ARGV, at + 1, at + f)}
  if n > 1 then a.shared = {unpack(ARGV, at + f + 1)} end
  return a
end

-- queueEvent makes every write that queues event a.id (queueArgs) for the destinations numbered
-- in fresh (indexes of a.queues), once everything is checked: Redis keeps the writes a script
-- made before it failed, so none is made before the event is known to be queued. fields are
-- each delivery hash's field/value pairs; shared, when given, the shared hash's (T p:<id>), which
-- holds the header and body (fields then do not) and the call's token ('ac'), each delivery hash
-- saying so ('p'); else each delivery hash holds the token. advance says the claim's version is
-- newer than the entity's accepted one: it is written, for the version ttl, and the delivered
-- versions of every queue of a.queues expire with it. The dedupe keys are marked done (which
-- ends a claim: same key). A fresh queue's listing and due queue get the event.
-- An ordered queue (its order key a.keys[i] set) gets the event in its key's FIFO (Q k:<key>,
-- by sequence), and its delivery hash the key ('ok') and the sequence ('sq'): the route's next
-- (T n), taken once for the event, the same in each of its ordered queues. Only the key's head
-- is in the due queue: the event is due (as any other) if its key has no other event, else it
-- waits, with no due time ('nxt') and no entry in Q q, until the outcome that ends the one before
-- it promotes it (leaveKey). An event queued in no ordered queue writes nothing of this.
-- The first write is the sequence's or the hash with the body, else the version or a dedupe
-- key: at maxmemory (noeviction) Redis refuses a script's first write that may grow memory (the
-- caller answers 503), and would let any later one through; so a refused script has written
-- nothing.
local function queueEvent(a, fresh, fields, shared, advance)
  local seq, heads = nil, {}
  for _, i in ipairs(fresh) do
    if a.keys[i] ~= '' then
      heads[i] = redis.call('EXISTS', a.queues[i] .. 'k:' .. a.keys[i]) == 0
      if not seq then seq = string.format('%d', redis.call('INCR', T .. 'n')) end
    end
  end
  -- fieldsOf are the delivery hash fields of queue i.
  local function fieldsOf(i)
    if a.keys[i] == '' then return fields end
    local f = {}
    for j = 1, #fields, 2 do
      if heads[i] or fields[j] ~= 'nxt' then f[#f + 1], f[#f + 2] = fields[j], fields[j + 1] end
    end
    f[#f + 1], f[#f + 2], f[#f + 3], f[#f + 4] = 'ok', a.keys[i], 'sq', seq
    return f
  end
  if #fresh > 0 and shared then
    redis.call('HSET', T .. 'p:' .. a.id, 'ac', a.mine, unpack(shared))
    for _, i in ipairs(fresh) do redis.call('HSET', a.hashes[i], 'p', '1', unpack(fieldsOf(i))) end
  else
    for _, i in ipairs(fresh) do redis.call('HSET', a.hashes[i], 'ac', a.mine, unpack(fieldsOf(i))) end
  end
  if advance then
    setversion(T .. 'v:' .. a.entity, a.version, a.vttl)
    -- The delivered versions expire with the accepted one.
    for _, q in ipairs(a.queues) do
      local wk = q .. 'w:' .. a.entity
      if tonumber(a.vttl) > 0 then redis.call('PEXPIRE', wk, a.vttl) else redis.call('PERSIST', wk) end
    end
  end
  for _, dk in ipairs(a.ids) do redis.call('SET', dk, 'd', 'PX', a.ttl) end
  for _, i in ipairs(fresh) do
    local q, member = a.queues[i], a.member
    -- A reused ID accepted at the same instant as its expired predecessor has the same member. A
    -- final listing's members are all in x (Update adds them to both, the trims take them from all).
    if redis.call('ZSCORE', q .. 'x', member) then
      redis.call('ZREM', q .. 'x', member)
      for _, s in ipairs(FINAL) do redis.call('ZREM', q .. 's:' .. s, member) end
    end
    if a.keys[i] ~= '' then redis.call('ZADD', q .. 'k:' .. a.keys[i], seq, a.id) end
    if heads[i] then redis.call('HSET', q .. 'K', a.id, a.keys[i]) end
    if a.keys[i] == '' or heads[i] then redis.call('ZADD', q .. 'q', a.due, a.id) end
    redis.call('ZADD', q .. 's:pending', 0, member)
  end
end

-- Ordered queues. Q k:<key> is the key's FIFO: its events, Pending or a Dead head that holds the
-- key, by sequence; its first is the head, the only one in the due queue (or Dead and holding
-- it). Q K maps each head's ID to its key, so that a head whose delivery hash is gone, which no
-- longer says its key, still releases it (leaveGone). Q H lists the held keys (all scored 0, so
-- they page by key); a held head keeps the time it began to hold (ns) in its field 'hd'.

-- promote makes the first event of key's FIFO in queue Q, the head, due at nowUs (µs, base 10).
-- A member whose delivery hash is gone (Redis evicted or lost it) holds nothing: it is dropped.
local function promote(key, nowUs)
  local k = Q .. 'k:' .. key
  for _ = 1, 64 do
    local first = redis.call('ZRANGE', k, 0, 0)[1]
    if not first then return end
    local h = Q .. 'e:' .. first
    local st = redis.call('HGET', h, 'st')
    if st == 'pending' then
      redis.call('HSET', h, 'nxt', nowUs .. '000')
      redis.call('ZADD', Q .. 'q', nowUs, first)
      redis.call('HSET', Q .. 'K', first, key)
      return
    end
    if st == 'dead' and redis.call('HEXISTS', h, 'hd') == 1 then
      redis.call('HSET', Q .. 'K', first, key)
      return
    end
    redis.call('ZREM', k, first)
  end
end

-- isHead says event id is the head of key's FIFO in queue Q.
local function isHead(key, id)
  return redis.call('ZRANGE', Q .. 'k:' .. key, 0, 0)[1] == id
end

-- leaveKey takes event id out of key's FIFO in queue Q; if it was the head, the next event of
-- the key becomes the head, due at nowUs.
local function leaveKey(key, id, nowUs)
  local head = isHead(key, id)
  redis.call('ZREM', Q .. 'k:' .. key, id)
  if head then
    redis.call('HDEL', Q .. 'K', id)
    promote(key, nowUs)
  end
end

-- leaveGone takes event id, gone from Redis (evicted or lost), out of its key's FIFO in queue Q
-- if it was a head there, found by Q K (key, when given, is the key its hash said), so that the
-- key's next event becomes the head, due at nowUs, rather than wait for good behind it. An
-- unordered queue has no Q K: nothing is written.
local function leaveGone(id, key, nowUs)
  key = key or redis.call('HGET', Q .. 'K', id)
  if not key then return end
  redis.call('HDEL', Q .. 'K', id)
  leaveKey(key, id, nowUs)
end

-- A held head never expires, nor does its member of the Dead listing: Q s:dead has no TTL while
-- a key is held (keepHeldListed), and once none is, it gets the TTL of Q x again, which is never
-- shorter than a listing's should be (update.lua).
local function keepHeldListed()
  if redis.call('EXISTS', Q .. 'H') == 1 then redis.call('PERSIST', Q .. 's:dead') end
end

-- unhold ends the hold of the dead head whose delivery hash is h on key.
local function unhold(h, key)
  redis.call('HDEL', h, 'hd')
  redis.call('ZREM', Q .. 'H', key)
  if redis.call('EXISTS', Q .. 'H') == 0 and redis.call('PTTL', Q .. 's:dead') == -1 then
    local ttl = redis.call('PTTL', Q .. 'x')
    if ttl > 0 then redis.call('PEXPIRE', Q .. 's:dead', ttl) end
  end
end

-- listFinal lists member, of an event just made final in state, in the state's listing and in x,
-- by its expiry keep ms from now (Redis's clock), and trims from the listings the members x says
-- expired. The listing and x expire with the last of their events (no sooner than keep from now,
-- at most a slack later), so a namespace gone quiet leaves nothing behind. The slack spares most
-- Updates the writes. x outlives every listing, so a final listing's members are all in x (see
-- queueEvent): x is looked at only when a listing is extended, since x is never shorter than any
-- listing (a listing with members has them in x too, and x got a TTL no shorter than the
-- listing's when the listing got its own). A held head's member is in the Dead listing only.
local function listFinal(state, member, keep)
  redis.call('ZADD', Q .. 's:' .. state, 0, member)
  local t = redis.call('TIME')
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', Q .. 'x', nowMs + tonumber(keep), member)
  local ms = tonumber(keep)
  local slack = math.min(math.floor(ms / 8), 60000)
  if redis.call('PTTL', Q .. 's:' .. state) < ms then
    redis.call('PEXPIRE', Q .. 's:' .. state, ms + slack)
    if redis.call('PTTL', Q .. 'x') < ms + slack then redis.call('PEXPIRE', Q .. 'x', ms + 2 * slack) end
    if state == 'dead' then keepHeldListed() end
  end
  local expired = redis.call('ZRANGEBYSCORE', Q .. 'x', '-inf', nowMs, 'LIMIT', 0, 64)
  if #expired > 0 then
    redis.call('ZREM', Q .. 'x', unpack(expired))
    for _, s in ipairs(FINAL) do redis.call('ZREM', Q .. 's:' .. s, unpack(expired)) end
  end
end
