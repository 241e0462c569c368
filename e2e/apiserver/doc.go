// Package apiserver runs a real control plane on loopback for the e2e
// tests: etcd (embedded, go.etcd.io/etcd/server/v3/embed), kube-apiserver
// (k8s.io/kubernetes/cmd/kube-apiserver/app/testing, in process, with its
// generated serving certificate, client CA and loopback token) and
// kube-scheduler (k8s.io/kubernetes/cmd/kube-scheduler/app, in process,
// reading a kubeconfig file as a deployed scheduler does). No
// kube-controller-manager runs, so Start does the two things the tests
// need from it: the default ServiceAccount of each namespace it is asked
// for (EnsureNamespace), and a Node without the not-ready taint that the
// API server's admission adds to a new Node (CreateNode).
//
// Everything listens on 127.0.0.1 and stops when the test ends. Tests get
// a rest.Config (Cluster.Config) and a kubeconfig file (Cluster.Kubeconfig)
// for binaries they run.
package apiserver
