-- TakeStart: the namespace's delivery rate limit, one start per interval across every node,
-- kept at T..'r' as the time of the last start (Redis's clock, in microseconds), so that a
-- reload changing the interval spaces the next start by the new one. ARGV[1]: the interval in
-- microseconds. Returns 0 when it took a start, else the microseconds until the next may be
-- free. Redis's own clock, so the nodes' clocks do not matter; the key lives one interval.
-- A clock that went back (a start recorded ahead of it) holds the route up one interval at most.
local key = T .. 'r'
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local interval = tonumber(ARGV[1])
local last = redis.call('GET', key)
local px = math.ceil(interval / 1000) + 1
if last then
  if tonumber(last) > now then
    -- A start ahead of this clock: it went back (a failover to a server whose clock is behind,
    -- or a step). Its distance means nothing here, so count it as just now: one interval.
    redis.call('SET', key, string.format('%.0f', now), 'PX', px)
    return interval
  end
  local free_at = tonumber(last) + interval
  if free_at > now then
    return free_at - now
  end
end
redis.call('SET', key, string.format('%.0f', now), 'PX', px)
return 0
