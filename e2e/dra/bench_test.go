package dra

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// BenchmarkDRACommands times, against a real API server,
// `accel-doctor claim -o json` explaining one pending claim (it asks for
// 9 devices; every node has 8) over ACCEL_DOCTOR_BENCH_SLICES
// ResourceSlices of 8 devices (default 1,000, one per node: the goal is
// ≤ 1 s), and `accel-doctor dra -o json` over
// ACCEL_DOCTOR_BENCH_NODES nodes (default 1,000; the target is 5,000
// nodes in ≤ 3 s and ≤ 300 MiB):
//
//	cd e2e && ACCEL_DOCTOR_BENCH_NODES=5000 go test -run '^$' -bench DRACommands -benchtime 5x -timeout 60m ./dra
//
// Nodes past the slices' count have NFD's GPU label and no slice (dra
// reports each). Every node carries an agent summary (v2) whose DRA
// registrations list the driver, except every 100th, which lists none:
// dra joins each slice with its node's registrations and warns of those. Metrics: ns/op is the command's wall time; cpu-s/op its
// user+system CPU; peak-RSS-MiB its maximum resident set (GNU time forks
// it, so the test binary's pages are not counted).
func BenchmarkDRACommands(b *testing.B) {
	slices := harness.EnvInt(b, "ACCEL_DOCTOR_BENCH_SLICES", 1000)
	nodes := max(harness.EnvInt(b, "ACCEL_DOCTOR_BENCH_NODES", 1000), slices)
	bin := harness.AccelDoctor(b)
	c := apiserver.Start(b)
	ctx := context.Background()
	const ns = "bench"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	harness.Parallel(b, nodes, func(i int) error {
		n := testNode(fmt.Sprintf("gpu-node-%05d", i))
		n.Labels["feature.node.kubernetes.io/pci-0302_10de.present"] = "true"
		drivers := `"` + driver + `"`
		if i%100 == 99 {
			drivers = ""
		}
		n.Annotations = map[string]string{"accel-doctor.io/summary": `{"v":2,"status":"PASS","time":"` + harness.SummaryTime() + `","accelerators":8,"dra":{"drivers":[` + drivers + `]}}`}
		_, err := c.CreateNode(ctx, n)
		return err
	})
	b.Logf("created %d nodes in %v", nodes, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	harness.Parallel(b, slices, func(i int) error {
		_, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, testSlice(fmt.Sprintf("gpu-node-%05d", i), 8), metav1.CreateOptions{})
		return err
	})
	b.Logf("created %d slices of 8 devices in %v", slices, time.Since(start).Round(time.Millisecond))
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "` + driver + `"`}}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	createBenchClaim(b, ctx, c, ns, "nine")

	b.Run(fmt.Sprintf("claim/slices=%d", slices), func(b *testing.B) {
		timed(b, 1, bin, "claim", "--kubeconfig", c.Kubeconfig, "-o", "json", ns+"/nine")
	})
	b.Run(fmt.Sprintf("dra/nodes=%d", nodes), func(b *testing.B) {
		timed(b, 0, bin, "dra", "--kubeconfig", c.Kubeconfig, "-o", "json")
	})
}

func createBenchClaim(b *testing.B, ctx context.Context, c *apiserver.Cluster, ns, name string) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 9}}}
	if _, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}},
		Containers:     []corev1.Container{{Name: "c", Image: "registry.invalid/none", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
	}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// timed runs the command b.N times under GNU time; exit status want (or 0)
// is success.
func timed(b *testing.B, want int, args ...string) {
	timeBin, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Logf("no /usr/bin/time (%v): peak RSS not measured", err)
	}
	rssFile := filepath.Join(b.TempDir(), "rss")
	var (
		maxRSS int64
		cpu    float64
	)
	for b.Loop() {
		argv := args
		if timeBin != "" {
			argv = append([]string{timeBin, "-f", "%U %S %M", "-o", rssFile}, args...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stderr = os.Stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != want) {
			b.Fatalf("%v: %v", args[1:], err)
		}
		if timeBin != "" {
			c, kib, err := harness.ReadTime(rssFile)
			if err != nil {
				b.Fatal(err)
			}
			maxRSS = max(maxRSS, kib)
			cpu += c
		}
	}
	b.ReportMetric(float64(maxRSS)/1024, "peak-RSS-MiB")
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
}
