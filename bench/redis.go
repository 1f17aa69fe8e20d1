package main

import (
	"os"

	"github.com/hookgate/hookgate/internal/redistest"
)

// startRedis starts a redis-server of the bench's own on a free loopback port, in a temporary
// directory, with appendonly yes and appendfsync always: every acknowledged write is on disk, the
// promise the Badger rows keep too.
func startRedis() (*redistest.Server, error) {
	dir, err := os.MkdirTemp("", "hookgate-bench-redis-")
	if err != nil {
		return nil, err
	}
	s, err := redistest.Start(dir, redistest.Durable...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	progressf("redis-server %s (appendfsync always) in %s", s.Addr, dir)
	return s, nil
}

// redisStorage is the hookgate storage line for s.
func redisStorage(s *redistest.Server) string {
	return "\tstorage redis redis://" + s.Addr + "\n"
}

// stopRedis stops s and removes its directory.
func stopRedis(s *redistest.Server) {
	s.Stop()
	os.RemoveAll(s.Dir)
}
