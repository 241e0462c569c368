package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkClusterCommand times `accel-doctor cluster -o json` against a
// real API server holding ACCEL_DOCTOR_BENCH_NODES nodes (default 500)
// and ACCEL_DOCTOR_BENCH_PODS pods (default 5000); the goal is
// 5,000 nodes and 50,000 pods in at most 3 s and 300 MiB:
//
//	cd e2e && ACCEL_DOCTOR_BENCH_NODES=5000 ACCEL_DOCTOR_BENCH_PODS=50000 \
//	  go test -run '^$' -bench ClusterCommand -benchtime 5x -timeout 60m ./cluster
//
// Each node looks like an 8-GPU node (NFD labels, nvidia.com/gpu 8/8, an
// agent summary); one in 100 has 8/7, one in 500 has its agent's FAIL.
// Pods are bound to nodes round-robin (spec.nodeName set, as if the
// scheduler had placed them), so the scheduler leaves them alone and the
// command pages through every one of them. Metrics: ns/op is the
// command's wall time; cpu-s/op its user+system CPU time (the rest of
// the wall time is the API server's, in this test process, on the same
// cores); peak-RSS-MiB its maximum resident set.
func BenchmarkClusterCommand(b *testing.B) {
	nodes := harness.EnvInt(b, "ACCEL_DOCTOR_BENCH_NODES", 500)
	pods := harness.EnvInt(b, "ACCEL_DOCTOR_BENCH_PODS", 5000)
	bin := harness.AccelDoctor(b)
	c := apiserver.Start(b)
	ctx := context.Background()
	const ns = "bench"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	harness.Parallel(b, nodes, func(i int) error {
		_, err := c.CreateNode(ctx, benchNode(i))
		return err
	})
	b.Logf("created %d nodes in %v", nodes, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	harness.Parallel(b, pods, func(i int) error {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, benchPod(i, nodes), metav1.CreateOptions{})
		return err
	})
	b.Logf("created %d pods in %v", pods, time.Since(start).Round(time.Millisecond))

	// The cluster is set up once: the sub-benchmark is what runs b.N
	// times.
	b.Run(fmt.Sprintf("nodes=%d/pods=%d", nodes, pods), func(b *testing.B) {
		// The child's peak RSS comes from GNU time, which forks it
		// from a small process: os/exec starts children with
		// CLONE_VM, so a child's own ru_maxrss would count this test
		// binary's pages, shared until its exec.
		timeBin, err := exec.LookPath("/usr/bin/time")
		if err != nil {
			b.Logf("no /usr/bin/time (%v): peak RSS not measured", err)
		}
		rssFile := filepath.Join(b.TempDir(), "rss")
		var (
			maxRSS   int64
			cpuTotal float64
		)
		for b.Loop() {
			args := []string{bin, "cluster", "--kubeconfig", c.Kubeconfig, "-o", "json"}
			if timeBin != "" {
				args = append([]string{timeBin, "-f", "%U %S %M", "-o", rssFile}, args...)
			}
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Stderr = os.Stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
				b.Fatalf("cluster: %v", err)
			}
			if timeBin != "" {
				cpu, kb, err := harness.ReadTime(rssFile)
				if err != nil {
					b.Fatal(err)
				}
				maxRSS = max(maxRSS, kb)
				cpuTotal += cpu
			}
		}
		b.ReportMetric(float64(maxRSS)/1024, "peak-RSS-MiB")
		b.ReportMetric(cpuTotal/float64(b.N), "cpu-s/op")
	})
}

func benchNode(i int) *corev1.Node {
	name := fmt.Sprintf("gpu-node-%05d", i)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname":                               name,
		"kubernetes.io/os":                                     "linux",
		"kubernetes.io/arch":                                   "amd64",
		"node.kubernetes.io/instance-type":                     "gpu-8x",
		"topology.kubernetes.io/zone":                          fmt.Sprintf("zone-%d", i%3),
		"feature.node.kubernetes.io/pci-0302_10de.present":     "true",
		"feature.node.kubernetes.io/pci-0200_15b3.present":     "true",
		"feature.node.kubernetes.io/cpu-cpuid.AVX512F":         "true",
		"feature.node.kubernetes.io/kernel-version.major":      "6",
		"nvidia.com/gpu.product":                               "NVIDIA-H100-80GB-HBM3",
		"nvidia.com/gpu.count":                                 "8",
		"feature.node.kubernetes.io/system-os_release.ID":      "ubuntu",
		"feature.node.kubernetes.io/memory-numa":               "true",
		"feature.node.kubernetes.io/pci-0b40_10de.present":     "false",
		"feature.node.kubernetes.io/storage-nonrotationaldisk": "true",
	}}}
	status, layer, code := "PASS", 0, ""
	if i%500 == 499 {
		status, layer, code = "FAIL", 4, "CGROUP_DEVICE_DENIED"
	}
	n.Annotations = map[string]string{"accel-doctor.io/summary": fmt.Sprintf(
		`{"v":1,"status":%q,"layer":%d,"code":%q,"message":"bench","time":"`+harness.SummaryTime()+`","accelerators":8,"resources":["nvidia.com/gpu"]}`, status, layer, code)}
	alloc := "8"
	if i%100 == 99 {
		alloc = "7"
	}
	n.Status.Capacity = resources(map[corev1.ResourceName]string{"nvidia.com/gpu": "8", "ephemeral-storage": "1Ti", "hugepages-1Gi": "0"})
	n.Status.Allocatable = resources(map[corev1.ResourceName]string{"nvidia.com/gpu": alloc, "ephemeral-storage": "900Gi", "hugepages-1Gi": "0"})
	return n
}

func benchPod(i, nodes int) *corev1.Pod {
	q := resource.MustParse("1")
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("train-%06d", i), Labels: map[string]string{"app": "train", "job": fmt.Sprintf("job-%d", i/8)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "trainer", Image: "registry.invalid/trainer:v1",
			Command: []string{"python", "-m", "train", "--epochs", "10"},
			Env:     []corev1.EnvVar{{Name: "NCCL_DEBUG", Value: "WARN"}, {Name: "RANK", Value: strconv.Itoa(i % 8)}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": q, corev1.ResourceCPU: resource.MustParse("4")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": q},
			},
		}}},
	}
	if nodes > 0 {
		p.Spec.NodeName = fmt.Sprintf("gpu-node-%05d", i%nodes)
	}
	return p
}
