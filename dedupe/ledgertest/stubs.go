package ledgertest

var nodesChecks []nodesCheck
