package agent

import (
	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
)

// DRASummary is the summary's record of the node's DRA registrations,
// from what the run's kube.dra read (env.DRARegistrations: nothing is
// read again). A registration that could not be judged is NotRun with
// the reason, never an empty list: `accel-doctor dra` reads an empty list
// as "no driver is registered here" and warns of every slice of the node.
func DRASummary(env *diagnose.Env) *cluster.DRA {
	if env == nil {
		return &cluster.DRA{Drivers: []string{}, NotRun: "no check environment"}
	}
	drivers, known, why := env.DRARegistrations()
	if !known {
		return &cluster.DRA{Drivers: []string{}, NotRun: cluster.Cut(why, maxMessageBytes)}
	}
	return &cluster.DRA{Drivers: drivers}
}
