package diagnose

import (
	"sort"
	"sync"

	"github.com/accel-doctor/accel-doctor/internal/probe"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Code is the catalog entry of a finding code: what `explain CODE` prints.
type Code struct {
	Code        string
	Layer       report.Layer
	Title       string // one line
	Explain     string // the long form: what it means, how it was decided, why it matters
	Remediation string // what to do, for non-PASS findings
}

// CodeCheckCrashed is emitted by Run itself when a check panics.
const CodeCheckCrashed = report.CodeCrashed

var coreCodes = []Code{{
	Code:  CodeCheckCrashed,
	Title: "a check stopped with an internal error",
	Explain: `A check of accel-doctor panicked. The other checks still ran and their
findings stand; this one could not look, so it is NOT_RUN. The evidence holds
the stack trace.`,
	Remediation: "Report a bug with the output of `accel-doctor snapshot snap.tar.gz` and this report.",
}}

// catalogs is the explicit list of every layer's codes.
func catalogs() [][]Code {
	return [][]Code{coreCodes, pciCodes, driverCodes, devnodeCodes, cgroupCodes, nodeCDICodes, containerCodes, runtimeCodes(), cdiCodes(), probeCodes(), iommuCodes(), pciConfigCodes(), vfioCodes(), kubeCodes(), draCodes()}
}

// Codes returns the whole catalog, sorted by code.
func Codes() []Code {
	var all []Code
	for _, c := range catalogs() {
		all = append(all, c...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Code < all[j].Code })
	return all
}

// LookupCode finds a code's catalog entry.
func LookupCode(code string) (Code, bool) {
	for _, cs := range builtCatalogs() {
		for _, c := range cs {
			if c.Code == code {
				return c, true
			}
		}
	}
	return Code{}, false
}

// builtCatalogs are the catalogs, built on the first lookup (every
// finding that is not a PASS makes one, for its remediation): building
// them allocates some 20 KB, once per process instead of once per
// finding. A scan of a few hundred codes costs less than building a map
// of them for the one or two lookups of a healthy host's check.
var builtCatalogs = sync.OnceValue(catalogs)

// Registry returns every check, in layer order. It is explicit on purpose:
// no init() registration, so the list is read here and a test can reject
// duplicate IDs and undeclared codes.
func Registry() []Check {
	var all []Check
	all = append(all, pciChecks()...)
	all = append(all, pciConfigCheck())
	all = append(all, driverChecks()...)
	all = append(all, devnodeChecks()...)
	all = append(all, cgroupChecks()...)
	all = append(all, nodeCDICheck())
	all = append(all, kubeCheck(), draCheck())
	all = append(all, iommuChecks()...)
	all = append(all, vfioCheck())
	return all
}

// probeCodes are the functional layer's codes (internal/probe): the probe
// command and container --probe emit them, outside the registry (the
// probe runs in a container, or in one's namespaces, not over a root).
func probeCodes() []Code {
	out := make([]Code, 0, len(probe.Codes))
	for _, c := range probe.Codes {
		out = append(out, Code{Code: c.Code, Layer: report.LayerFunctional, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	return out
}
