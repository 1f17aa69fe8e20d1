-- Release. ARGV: the dedupe keys' suffixes. Drops claims, never a done record.
for i = 1, #ARGV do
  local k = T .. ARGV[i]
  if redis.call('GET', k) == 'c' then redis.call('DEL', k) end
end
return 'ok'
