// Package redisstore is the ledger and outbox of dedupe kept in Redis (a single server, Sentinel
// or Cluster), so that every gateway node sharing it sees the same claims, versions and queue,
// with the Badger store's contract (dedupe.Ledger, dedupe.Outbox).
//
// Every key of a namespace (a route) starts with its tag T = "{PREFIX:NAMESPACE}:", the Cluster
// hash tag, so one namespace lives on one shard and its scripts are atomic there (the prefix is
// escaped of ':{}%' and the namespace of '{}%' as %XX):
//
//	T i:<id>           dedupe record of an event ID: "c<call's token>" while claimed (PX: the claim's lease), "d" once done (PX: dedupe TTL)
//	T h:<digest>       the same for the digest of the signed bytes
//	T v:<entity>       the entity's accepted version, base 10 (PX: VersionTTL from its last advance)
//	T w:<entity>       its newest delivered version, expiring with the accepted one
//	T e:<id>           hash: a queued event, request and delivery state (event.go); PX keep once final
//	T q                zset: Pending events due for Lease, by due time (µs)
//	T s:<state>        zset: each state's events for List, all scored 0, member <16 hex accept ns><id>; a final state's PX: its last event's keep
//	T x                zset: final events' listing members by expiry (ms), trimmed by Update and List; PX as s:<final>
//	T o:<entity>       set: the entity's holders, its events one Lease handed out and not yet updated
//	T L                zset: entity → its holders' lease end (µs)
//	T b:<entity>       zset: events of the entity waiting while others hold it, by due time (µs)
//	T g:<token>        string: how many gone events' queue entries the Lease run of that token dropped, for its retry (PX 60 s)
//	T r                string: the time of the route's last delivery start reserved (µs, Redis's clock; PX: one interval past it), for TakeStart
//	T z                string: where Lease's walk of the Pending listing for members of gone events goes on (lease.lua); only while one is owed
//
// Each operation is one round trip: Claim, Done, Release, Accept, Lease, Update, Replay and List
// are a Lua script each (lua/), run as EVALSHA (EVAL once when the server lacks it); Get is an
// HGETALL, DeliveredVersion a GET, Pending a ZCARD. Times the contract gives (now, due times,
// leases) are compared as given; Redis's own clock only expires keys (PX, PEXPIRE) where the
// contract speaks of real time: claims, dedupe windows, versions, keep.
//
// Resharding a Cluster moves a namespace's slot key by key. Each script declares the keys it
// knows before it runs, the tag T first, which is never a key, so Redis answers a script of a
// namespace whose slot is moving TRYAGAIN rather than run it against the part of the keys one
// node holds; go-redis retries a few times, then the call fails (Accept answers 503, the
// deliverer tries again) until the move ends. Get, Pending and DeliveredVersion follow it (ASK).
//
// Leases are fenced by the event hash's count of leases ("tok"), which each Lease increments
// and Update must be given back. One entity's events are never out on two nodes at once: the
// events of an entity that one Lease hands out (one node's deliverer then sends them one at a
// time, newest first) become its holders (T o, T L), and any other due event of the entity is
// parked in T b:<entity>, off the queue, until the holders' Updates or the lapse of their
// lease free the entity and put the earliest parked events back on the queue.
package redisstore
