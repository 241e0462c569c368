// Package cluster reads a Kubernetes cluster through its API server and
// says, per node, what stands between its accelerators and the pods that
// want them: extended resources whose allocatable is below their capacity,
// accelerator hardware present (Node Feature Discovery's PCI labels, or
// the agent's summary annotation) with no resource advertised,
// device-plugin and DRA-driver pods that are not Ready, Pending pods
// grouped by what the scheduler said they lack, and nodes whose agent
// reports a FAIL.
//
// It reads with paged LISTs (Limit/Continue, PageSize objects a page) of
// Nodes, Pods and FailedScheduling Events, never a GET per object, and
// keeps only what the verdict needs from each page, so its memory grows
// with the number of problems, not with the size of the cluster. It
// writes nothing.
//
// The analysis (Analyzer) works on API objects alone and is tested on
// objects; the e2e module (e2e/cluster) runs `accel-doctor cluster`
// against a real kube-apiserver and kube-scheduler.
package cluster
