// Package diagnose turns what the readers found into findings: the explicit
// registry of checks, the catalog of finding codes with their long
// explanations, the layer order, and Run, which builds a report.Report.
//
// Readers (pci, driver, devnode, cgroup, ...) only return facts; every
// judgement (PASS, WARN, FAIL, NOT_RUN) is made here, one file per layer.
package diagnose
