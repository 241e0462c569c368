// Package lint checks Kubernetes workload manifests for the accelerator
// mistakes that show up later as a Pending pod, a rejected object or a
// container that sees the wrong devices, before anything runs.
//
// It reads bytes only (the manifests a caller hands it: files, stdin) and
// touches nothing else: no host file, no API server. Documents are split
// here (YAML with ---, or a JSON stream), converted with sigs.k8s.io/yaml
// and decoded into the k8s.io/api types of Kubernetes 1.37. Every bad input
// becomes a finding with its document and line; none panics or hangs
// (FuzzLint). Input is bounded: MaxInputBytes per input, MaxDocumentBytes
// per document. The rules and their codes are Codes; docs/lint.md is
// generated from them.
//
// The cluster rules (lint --cluster, the LINT_CLUSTER_* codes) judge the
// workloads against a Cluster: the RuntimeClasses, DeviceClasses and Nodes
// the caller listed (internal/kubecli does, with client-go), each with the
// error of its LIST. This package still asks no API server; it matches
// with the scheduler's own helpers (k8s.io/component-helpers' node
// affinity and taint matching).
package lint
