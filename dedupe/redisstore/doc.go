// Package redisstore is the ledger and outbox of dedupe kept in Redis (a single server, Sentinel
// or Cluster), so that every gateway node sharing it sees the same claims, versions and queue.
package redisstore
