package redisstore

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts, one per write, each with lua/common.lua's helpers in front. A script runs
// as EVALSHA, and as EVAL when the server does not know it (after a restart, or on a new
// Cluster node): one round trip either way but the first.
var (
	claimScript        = script("claim.lua")
	doneScript         = script("done.lua")
	releaseScript      = script("release.lua")
	acceptScript       = script("accept.lua")
	doneAndQueueScript = script("doneandqueue.lua")
	leaseScript        = script("lease.lua")
	updateScript       = script("update.lua")
	replayScript       = script("replay.lua")
	listScript         = script("list.lua")
	startScript        = script("start.lua")
	skipScript         = script("skip.lua")
	heldScript         = script("held.lua")
)

//go:embed lua/*.lua
var luaFiles embed.FS

func script(name string) *redis.Script {
	common, err := luaFiles.ReadFile("lua/common.lua")
	if err != nil {
		panic(err)
	}
	body, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(err)
	}
	return redis.NewScript(string(common) + "\n" + string(body))
}
