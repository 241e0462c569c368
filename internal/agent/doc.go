// Package agent is `accel-doctor agent`, the DaemonSet mode of accel-doctor:
// it runs check over the node's root every interval and publishes the
// verdict where the cluster sees it: a node condition AcceleratorsReady
// (True, False with the first failing code as its reason, or Unknown when
// nothing could be judged: node-problem-detector's custom-plugin
// convention, OK 0 / NonOK 1 / Unknown 2), an Event on each transition,
// the summary annotation internal/cluster reads (cluster.Summary), and
// Prometheus metrics.
//
// Its writes to the API server are its own node's status (the conditions,
// through the status subresource) and its own node's annotations, and
// Events about that node; nothing else. It never exits on an API error: it
// backs off and keeps serving its metrics.
//
// It lives in accel-doctor-kube (internal/kubecli), never in accel-doctor:
// it links client-go.
package agent
