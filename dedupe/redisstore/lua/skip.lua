-- Skip of an ordered event's dead head in queue Q, which holds its key: it releases the key and
-- stays a dead letter, kept for keep from now (replayable, to its key's tail), and the next event
-- of its key becomes the head, due now. ARGV: 1 event ID, 2 now µs, 3 keep ms, 4 this call's
-- token. Returns {'ok'}, {'not-found'} or {'not-held'}. The skipped event keeps the call's token
-- ('sk'): the same call run again (go-redis runs a call again when its reply was lost) finds its
-- own skip done, and answers 'ok' as its first run did.
local id, now, keep, run = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local h = Q .. 'e:' .. id
local cur = redis.call('HMGET', h, 'st', 'hd', 'ok', 'lx', 'p', 'sk')
if not cur[1] then return {'not-found'} end
if cur[6] == run then return {'ok'} end
if cur[1] ~= 'dead' or not cur[2] or not cur[3] then return {'not-held'} end
local key = cur[3]
unhold(h, key)
redis.call('HSET', h, 'sk', run)
redis.call('PEXPIRE', h, keep)
if cur[5] then settleBody(id) end
listFinal('dead', cur[4], keep)
leaveKey(key, id, now)
return {'ok'}
