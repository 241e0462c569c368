package claim

import "github.com/accel-doctor/accel-doctor/internal/catalog"

// Code is one finding code of `accel-doctor claim` or `accel-doctor dra`,
// in the catalog that `explain` shows. The catalog lives in
// internal/catalog, which every binary links (this package links
// client-go and the DRA libraries, which accel-doctor does not).
type Code = catalog.Code

// Codes is the catalog of `claim`, in report order.
var Codes = catalog.Claim

// FleetCodes is the catalog of `accel-doctor dra`, in report order.
var FleetCodes = catalog.Fleet

// CodeOf is the catalog entry of code.
func CodeOf(code string) (Code, bool) { return codeIn(Codes, code) }

func fleetCodeOf(code string) (Code, bool) { return codeIn(FleetCodes, code) }

func codeIn(cs []Code, code string) (Code, bool) {
	for _, c := range cs {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
