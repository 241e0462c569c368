package cluster

import "github.com/accel-doctor/accel-doctor/internal/catalog"

// Code is one finding code of `accel-doctor cluster`, in the catalog that
// `explain` and docs/cluster.md show. The catalog lives in
// internal/catalog, which every binary links (this package links
// client-go, which accel-doctor does not).
type Code = catalog.Code

// Codes is the catalog, in report order.
var Codes = catalog.Cluster

// CodeOf returns the catalog entry of code.
func CodeOf(code string) (Code, bool) {
	for _, c := range Codes {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
