// Package redisstore is the ledger and outbox of dedupe kept in Redis (a single server, Sentinel
// or Cluster), so that every gateway node sharing it sees the same claims, versions and queue,
// with the Badger store's contract (dedupe.Ledger, dedupe.Outbox).
//
// Every key of a namespace (a route) starts with its tag T = "{PREFIX:NAMESPACE}:", the Cluster
// hash tag, so one namespace lives on one shard and its scripts are atomic there (the prefix is
// escaped of ':{}%' and the namespace of '{}%' as %XX). A route delivers to one or more
// destinations (dedupe.Destination), each with its own queue, whose namespace
// (dedupe.QueueNamespace) the queue methods take; the keys of a destination's queue start with
// its queue prefix Q: T itself for the route's default destination, so its queue's keys are the
// route's own as they were before routes had several destinations, and T + "@" + its name + ":"
// for a named one (a name is letters, digits, '-' and '_': nothing to escape). Q starts with T,
// so every queue of a route lives in the route's hash slot.
//
// The route's own keys:
//
//	T i:<id>           dedupe record of an event ID: "c<call's token>" while claimed (PX: the claim's lease), "d" once done (PX: dedupe TTL)
//	T h:<digest>       the same for the digest of the signed bytes
//	T v:<entity>       the entity's accepted version, base 10 (PX: VersionTTL from its last advance)
//	T p:<id>           hash: the header and body of an event queued for several destinations, stored once (event.go); for
//	                   good while one of its deliveries is Pending, PX: the latest expiry of its Dead ones once none is, gone
//	                   once all are Delivered or Superseded (lua/common.lua, settleBody); field "d" names its destinations
//	T n                the route's sequence (INCR), taken by an event queued in an ordered queue (order.go); absent until one is
//
// Each queue's keys (the default destination's: Q = T):
//
//	Q e:<id>           hash: an event's delivery to the queue's destination, its state and its request (method, URI, scheme,
//	                   entity, version, accept time, body size): with the header and body too for an event queued for this
//	                   destination alone, so exactly as before routes had several; PX keep once final, but for a Dead
//	                   head that holds its key; in an ordered queue its order key "ok" and sequence "sq" too, no due
//	                   time "nxt" while it waits behind its key's head, and "hd" (ns) while it holds its key
//	Q q                zset: Pending events due for Lease, by due time (µs)
//	Q s:<state>        zset: each state's events for List, all scored 0, member <16 hex accept ns><id>; a final state's PX: its last event's
//	                   keep, none for s:dead while a key is held (its held head is not in x, and never expires)
//	Q x                zset: final events' listing members by expiry (ms), trimmed by Update and List; PX as s:<final>
//	Q w:<entity>       the entity's newest version delivered to this destination, expiring with the accepted one (T v:)
//	Q o:<entity>       set: the entity's holders, its events one Lease handed out and not yet updated
//	Q L                zset: entity → its holders' lease end (µs)
//	Q b:<entity>       zset: events of the entity waiting while others hold it, by due time (µs)
//	Q g:<token>        string: how many gone events' queue entries the Lease run of that token dropped, for its retry (PX 60 s)
//	Q r                string: the time of the queue's last delivery start reserved (µs, Redis's clock; PX: one interval past it), for TakeStart
//	Q z                string: where Lease's walk of the Pending listing for members of gone events goes on (lease.lua); only while one is owed
//	Q k:<key>          zset: an ordered queue's FIFO of order key <key>, event ID by sequence: its Pending events and a Dead head
//	                   that holds the key; the first is the head, the only one in Q q (order.go)
//	Q K                hash: an ordered queue's heads, event ID → its order key, so that Lease, meeting a head whose hash is
//	                   gone (evicted, deleted), takes it out of its key and makes the next event the head (lua/lease.lua)
//	Q H                zset: the keys held by their dead head, all scored 0 (paged by key); the head's field "hd" says since when
//
// An event is accepted once for the route (T i:, T h:, T v:) and queued in every destination's
// queue in the same script, which checks every destination's bound (the size of its Q
// s:pending) before its first write. Queued for one destination, it is one hash, Q e:<id>, with
// its body. Queued for several, its header and body are in T p:<id> once, with the names of its
// destinations; each destination's Q e:<id> holds its delivery and the small fields of the
// request, and field "p" to say the rest is shared. A delivery's final Update recomputes from
// every delivery's state how long T p:<id> is kept; a Replay keeps it for good again. So an event
// costs Redis its body once however many destinations it has, and the last of its deliveries
// leaves nothing of it without a TTL.
//
// DoneAndQueue (sync mode: the app took the event) marks the claim done as Done does and queues
// the event as Accept does, in one script, but queues it only in the queues that hold no
// delivery of its ID (reused after its dedupe window), and never refuses it. Its header and body
// are shared, in T p:<id> naming those destinations alone, unless an earlier event of the ID
// still has its own shared there: each of its deliveries then holds a copy, as the delivery of
// an event of one destination does, and the earlier event's deliveries are untouched.
//
// Ordered queues (dedupe.Orderer, a destination's OrderKey): an event queued in one takes the
// route's next sequence number (T n), the same in each of its queues, and joins its key's FIFO
// (Q k:<key>); only the FIFO's first, the head, is in the due queue, so Lease, which knows
// nothing of order, hands out only heads. The Update that ends a head (Delivered, Superseded, or
// Dead with OnDead Skip) takes it out and makes the next one the head, due then, in the same
// script; a Dead head under OnDead Hold stays, holding its key (Q H), without expiry, until
// Replay makes it Pending again (still first) or Skip releases the key (then it expires after
// keep). A dead letter replayed after it left its key joins it again at the tail, under a new
// sequence number. Waiting events are Pending: they count in the backlog and its bound.
//
// Each operation is one round trip: Claim, Done, Release, Accept, DoneAndQueue, Lease, Update,
// Replay, List, Skip and HeldKeys are a Lua script each (lua/), run as EVALSHA (EVAL once when
// the server lacks it); Get is an HGETALL (and an HMGET of T p:<id> for a Pending or Dead
// delivery of an event of several destinations), DeliveredVersion a GET, Pending and CountHeld a
// ZCARD. Times the contract gives (now, due times, leases) are compared as given; Redis's own
// clock only expires keys (PX, PEXPIRE) where the contract speaks of real time: claims, dedupe
// windows, versions, keep.
//
// Resharding a Cluster moves a namespace's slot key by key. Each script declares the keys it
// knows before it runs, the tag T (or the queue prefix Q) first, which is never a key, so Redis
// answers a script of a namespace whose slot is moving TRYAGAIN rather than run it against the
// part of the keys one node holds; go-redis retries a few times, then the call fails (Accept
// answers 503, the deliverer tries again) until the move ends. Get, Pending and DeliveredVersion
// follow it (ASK).
//
// Leases are fenced by the delivery hash's count of leases ("tok"), which each Lease increments
// and Update must be given back: each destination's leases are its own. One entity's events are
// never out on two nodes at once in one queue: the events of an entity that one Lease hands out
// (one node's deliverer then sends them one at a time, newest first) become its holders (Q o,
// Q L), and any other due event of the entity in the queue is parked in Q b:<entity>, off the
// queue, until the holders' Updates or the lapse of their lease free the entity and put the
// earliest parked events back on the queue. An entity held in one destination's queue is not
// held in another's.
package redisstore
