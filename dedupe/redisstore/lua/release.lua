-- Release. ARGV: the dedupe keys' suffixes. Drops claims, never a done record.
for i = 1, #ARGV do
  local k = T .. ARGV[i]
  local v = redis.call('GET', k)
  if v and string.sub(v, 1, 1) == 'c' then redis.call('DEL', k) end
end
return 'ok'
