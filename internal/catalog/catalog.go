// Package catalog holds the finding codes of the commands outside check's
// registry (internal/diagnose keeps check's): `plugin test` (Plugin) and
// `plugin test --dra` (DRAPlugin), `lint` (Lint), `cluster` (Cluster),
// `claim` (Claim) and `dra` (Fleet). Every one of them is a layer-6 code.
//
// It imports nothing. The packages that report these codes link gRPC
// (internal/deviceplugin, internal/dramock) or client-go and the API types
// (internal/lint, internal/cluster, internal/claim), which accel-doctor
// does not link (internal/archtest holds it); the catalog lives here so
// that every binary's explain knows every code without them, and without
// handing the question to another binary. Those packages keep their names
// for the codes (lint.CodeClean is LintClean) and their Codes (lint.Codes
// is Lint).
package catalog

// Code is one finding code's catalog entry: what `accel-doctor explain
// CODE` prints.
type Code struct {
	Code string
	// Status is the outcome the code is reported with: PASS, WARN, FAIL
	// or NOT_RUN, or a sentence where it depends on what was found.
	Status string
	// Title is one line.
	Title string
	// Explain is the long form: what it means, how it was decided, why
	// it matters.
	Explain string
	// Remediation is what to do, for codes that are not a PASS.
	Remediation string
	// Facts names the API fields the code is decided from, where the
	// catalog says.
	Facts string
}
