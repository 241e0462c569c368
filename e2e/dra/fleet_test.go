package dra

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// TestDRAFleet plants, in a real API server: a node with NFD's NVIDIA GPU
// label and no ResourceSlice; a pool with a stale generation-1 slice beside
// its generation-2 slice, which says the pool has 2 slices; a pod the
// scheduler leaves Pending on a claim no device matches; node-c, whose
// agent summary (v2) lists only another driver as registered with its
// kubelet, with a slice of the test driver; node-d, whose summary is an
// older agent's (v1), with a slice. `dra -o json` must name each, and
// nothing else: node-a's and node-b's summaries list the driver.
func TestDRAFleet(t *testing.T) {
	bin := harness.AccelDoctor(t)
	c := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "fleet"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	bare := testNode("gpu-no-slice")
	bare.Labels["feature.node.kubernetes.io/pci-0302_10de.present"] = "true"
	summary := map[string]string{
		"node-a": `{"v":2,"status":"PASS","time":"` + harness.SummaryTime() + `","accelerators":0,"dra":{"drivers":["` + driver + `"]}}`,
		"node-b": `{"v":2,"status":"PASS","time":"` + harness.SummaryTime() + `","accelerators":0,"dra":{"drivers":["` + driver + `","other.example.com"]}}`,
		"node-c": `{"v":2,"status":"PASS","time":"` + harness.SummaryTime() + `","accelerators":0,"dra":{"drivers":["other.example.com"]}}`,
		"node-d": `{"v":1,"status":"PASS","time":"` + harness.SummaryTime() + `","accelerators":0}`,
	}
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d"} {
		tn := testNode(n)
		tn.Annotations = map[string]string{"accel-doctor.io/summary": summary[n]}
		if _, err := c.CreateNode(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateNode(ctx, bare); err != nil {
		t.Fatal(err)
	}
	stale := testSlice("node-b", 2)
	cur := testSlice("node-b", 2)
	cur.Name = "node-b-gen2"
	cur.Spec.Pool.Generation, cur.Spec.Pool.ResourceSliceCount = 2, 2
	for _, s := range []*resourceapi.ResourceSlice{testSlice("node-a", 4), stale, cur, testSlice("node-c", 2), testSlice("node-d", 2)} {
		if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createClaimAndPod(t, ctx, c, ns, "stuck", "gpu", 1, `device.attributes["`+driver+`"].model == "B200"`)
	waitUnschedulable(t, ctx, c, ns, "stuck")

	rep, out, code := runCmd(t, ctx, bin, "dra", "--kubeconfig", c.Kubeconfig, "-o", "json")
	if code != 0 {
		t.Errorf("dra exit %d, want 0 (WARNs only):\n%s", code, out)
	}
	want := map[string]string{
		"DRA_FLEET_NODE_NO_SLICE":               "node/gpu-no-slice",
		"DRA_FLEET_POOL_GENERATIONS":            "pool " + driver + "/node-b",
		"DRA_FLEET_POOL_INCOMPLETE":             "pool " + driver + "/node-b",
		"DRA_FLEET_PENDING_ON_CLAIM":            "resourceclaim/" + ns + "/stuck",
		"DRA_FLEET_DRIVER_NOT_REGISTERED":       "node/node-c driver " + driver,
		"DRA_FLEET_DRIVER_REGISTRATION_NOT_RUN": "resourceslices (agent summary v1)",
	}
	got := map[string][]string{}
	for _, f := range rep.Findings {
		got[f.Code] = append(got[f.Code], f.Subject)
	}
	for code, subject := range want {
		if s := got[code]; len(s) != 1 || s[0] != subject {
			t.Errorf("%s: subjects %q, want [%q]", code, s, subject)
		}
	}
	if len(rep.Findings) != len(want) {
		t.Errorf("%d findings, want %d:\n%s", len(rep.Findings), len(want), out)
	}
}
