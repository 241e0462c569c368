package cluster

import "time"

// summaryTime is the time of an agent summary the tests plant: now, when
// it is planted, so that cluster and dra judge it current (a summary
// older than 3 of the agent's intervals is stale: internal/cluster
// Summary.Stale).
func summaryTime() string { return time.Now().UTC().Format(time.RFC3339) }
