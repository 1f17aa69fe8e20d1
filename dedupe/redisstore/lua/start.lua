-- TakeStart: a queue's delivery rate limit, one start per interval across every node, kept
-- at Q .. 'r' as the time of the last start reserved (Redis's clock, in microseconds), so
-- that a reload changing the interval spaces the next start by the new one. ARGV[1]: the
-- interval, ARGV[2]: how far ahead a start may be reserved, both in microseconds. Reserves the
-- next start, at the later of now and the last plus the interval, when it is at most ARGV[2]
-- away, and returns the microseconds until it; returns a longer wait, taking nothing, when it is
-- further. Ahead of time, so a node waiting out the round trip of its next reservation keeps the
-- pace. Redis's own clock, so the nodes' clocks do not matter; the key lives one interval past
-- the last start. A clock that went back (a start recorded further ahead of it than a start is
-- reserved, or a second) holds the route up one interval at most.
local key = Q .. 'r'
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local interval = tonumber(ARGV[1])
local ahead = tonumber(ARGV[2])
local px = math.ceil(interval / 1000) + 1
local free_at = now
local last = redis.call('GET', key)
if last then
  last = tonumber(last)
  if last > now + math.max(ahead, 1000000) then
    -- A start further ahead of this clock than one is reserved (or than a second, for a caller
    -- reserving none ahead): the clock went back (a failover to a server whose clock is
    -- behind, or a step). Its distance means nothing here, so count it as just now.
    last = now
    redis.call('SET', key, string.format('%.0f', now), 'PX', px)
  end
  free_at = math.max(now, last + interval)
end
local wait = free_at - now
if wait > ahead then
  return wait
end
redis.call('SET', key, string.format('%.0f', free_at), 'PX', px + math.ceil(wait / 1000))
return wait
