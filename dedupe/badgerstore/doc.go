// Package badgerstore is the ledger and outbox of dedupe kept in an embedded Badger database in
// one directory (the default store), with the contract of dedupe.Ledger and dedupe.Outbox. Badger
// locks its directory, so one process owns a store: sync mode's claims are held in memory
// (claims.go), and leases found at open belong to a process that died (outbox_recover.go).
//
// Keys are "<namespace>\x00<kind>\x00<rest>" (keys.go for the ledger's event, digest and
// version records, outbox_keys.go for the queue's). Every write goes through one group
// committer that shares a transaction and a sync among concurrent callers (commit.go); a failed
// write fails the store until it is reopened (failure.go). Dedupe records and queued events
// carry their expiry to the nanosecond in their values, since Badger's own TTL is whole seconds
// (it only reclaims their space); entity versions, kept for days, rely on it (version_record.go).
package badgerstore
