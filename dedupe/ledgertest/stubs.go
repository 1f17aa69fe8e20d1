package ledgertest

var leaseChecks, updateChecks, queryChecks []check
var nodesChecks []nodesCheck
