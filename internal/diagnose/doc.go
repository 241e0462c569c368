// Package diagnose turns what the readers found into findings: the explicit
// registry of checks, the catalog of finding codes with their long
// explanations, the layer order, and Run, which builds a report.Report.
//
// Readers (pci, driver, devnode, cgroup, ...) only return facts; every
// judgement (PASS, WARN, FAIL, NOT_RUN) is made here, one file per layer.
//
// Checks share the readers' results through Env (memo: each reader runs
// once per run, a caller that finds it running in another goroutine waits
// for it). Checks run one after the other in layer order, in one
// goroutine; a check whose reads need nothing earlier layers read may
// declare a Prefetch, which Run calls, as the run begins, in one more
// goroutine that runs the prefetches in layer order (iommu.state: the ACPI tables, the groups and, with the IOMMU
// off, /proc/config.gz's inflation, then the VFIO side; cgroup.mode: the
// target's cgroups and device programs). Findings and their order do not
// depend on it (TestPrefetchChangesNothing).
package diagnose
