package ledgertest

var updateChecks, queryChecks []check
var nodesChecks []nodesCheck
