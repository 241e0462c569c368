package dra

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

const driver = "gpu.e2e.example.com"

// jsonReport is the part of `claim -o json` the tests read.
type jsonReport struct {
	Findings []struct {
		Code     string `json:"code"`
		Status   string `json:"status"`
		Subject  string `json:"subject"`
		Summary  string `json:"summary"`
		Evidence []struct {
			Path  string `json:"path"`
			Value string `json:"value"`
		} `json:"evidence"`
	} `json:"findings"`
}

// TestClaimNamesTheSchedulersReason plants two nodes with a ResourceSlice of
// 4 fake devices each (model A100 with 40Gi on even indexes, H100 with 80Gi
// on odd ones), a DeviceClass of the driver, and claims whose pods the real
// scheduler cannot place; `claim -o json` must give the reason the
// scheduler gives, and per device the selector that excludes it. One claim
// the scheduler allocates: `claim` reports it allocated, with its devices.
func TestClaimNamesTheSchedulersReason(t *testing.T) {
	bin := harness.AccelDoctor(t)
	c := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const ns = "dra"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := c.CreateNode(ctx, testNode(n)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client.ResourceV1().ResourceSlices().Create(ctx, testSlice(n, 4), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Client.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "` + driver + `"`}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, class string
		count       int64
		selector    string
		// schedSays is in the pod's PodScheduled message; code is
		// the first finding of claim.
		schedSays, code string
		// everyDevice, when set, is in the evidence of all 8 devices.
		everyDevice string
	}{{
		name: "no-match", class: "gpu", count: 1, selector: `device.attributes["` + driver + `"].model == "B200"`,
		schedSays: "cannot allocate all claims", code: "CLAIM_NO_MATCHING_DEVICE",
		everyDevice: `excluded by request selector #0: device.attributes["` + driver + `"].model == "B200"`,
	}, {
		name: "no-capacity", class: "gpu", count: 1, selector: `device.capacity["` + driver + `"].memory.compareTo(quantity("200Gi")) >= 0`,
		schedSays: "cannot allocate all claims", code: "CLAIM_NO_MATCHING_DEVICE",
		everyDevice: `excluded by request capacity selector #0: device.capacity["` + driver + `"].memory`,
	}, {
		name: "too-many", class: "gpu", count: 5,
		schedSays: "cannot allocate all claims", code: "CLAIM_TOO_MANY_DEVICES",
	}, {
		name: "no-class", class: "nope", count: 1,
		schedSays: "device class nope does not exist", code: "CLAIM_CLASS_MISSING",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			createClaimAndPod(t, ctx, c, ns, tc.name, tc.class, tc.count, tc.selector)
			msg := waitUnschedulable(t, ctx, c, ns, tc.name)
			if !strings.Contains(msg, tc.schedSays) {
				t.Fatalf("scheduler says %q, want it to say %q", msg, tc.schedSays)
			}
			rep, out, code := runClaim(t, ctx, bin, c.Kubeconfig, ns+"/"+tc.name)
			if code != 1 {
				t.Errorf("claim exit %d, want 1:\n%s", code, out)
			}
			if len(rep.Findings) == 0 || rep.Findings[0].Code != tc.code || rep.Findings[0].Status != "FAIL" {
				t.Fatalf("claim's first finding is not a FAIL %s:\n%s", tc.code, out)
			}
			// The scheduler's own words name the class when it is
			// missing; claim's summary must too.
			if tc.code == "CLAIM_CLASS_MISSING" && !strings.Contains(rep.Findings[0].Summary, "device class nope does not exist") {
				t.Errorf("summary %q does not say what the scheduler says (%q)", rep.Findings[0].Summary, msg)
			}
			if tc.everyDevice != "" {
				devs := map[string]bool{}
				for _, ev := range rep.Findings[0].Evidence {
					if strings.HasPrefix(ev.Path, "node-") && strings.Contains(ev.Value, tc.everyDevice) {
						devs[ev.Path] = true
					}
				}
				for _, n := range []string{"node-a", "node-b"} {
					for i := range 4 {
						p := fmt.Sprintf("%s/%s/%s/dev-%d", n, driver, n, i)
						if !devs[p] {
							t.Errorf("no evidence %q for device %s:\n%s", tc.everyDevice, p, out)
						}
					}
				}
			}
			// The allocator, run offline, agrees (its finding is
			// the last, and is judged FAIL too).
			last := rep.Findings[len(rep.Findings)-1]
			if !strings.Contains(last.Summary, "agrees") || last.Status != "FAIL" {
				t.Errorf("allocator finding %+v, want agreement", last)
			}
		})
	}

	t.Run("allocatable", func(t *testing.T) {
		const name = "two-h100"
		createClaimAndPod(t, ctx, c, ns, name, "gpu", 2, `device.attributes["`+driver+`"].model == "H100"`)
		var claim *resourceapi.ResourceClaim
		took, err := apiserver.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			var err error
			claim, err = c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && claim.Status.Allocation != nil && len(claim.Status.ReservedFor) > 0, err
		})
		if err != nil {
			t.Fatalf("claim %s not allocated after %v: %v", name, took, err)
		}
		rep, out, code := runClaim(t, ctx, bin, c.Kubeconfig, ns+"/"+name)
		if code != 0 || len(rep.Findings) != 1 || rep.Findings[0].Code != "CLAIM_ALLOCATED" {
			t.Fatalf("claim exit %d, want 0 and CLAIM_ALLOCATED:\n%s", code, out)
		}
		got := map[string]bool{}
		for _, ev := range rep.Findings[0].Evidence {
			got[ev.Path+"="+ev.Value] = true
		}
		for _, d := range claim.Status.Allocation.Devices.Results {
			if !strings.HasSuffix(d.Device, "-1") && !strings.HasSuffix(d.Device, "-3") {
				t.Errorf("scheduler allocated %s, not an H100", d.Device)
			}
			want := "status.allocation.devices.results=" + d.Request + ": " + d.Driver + "/" + d.Pool + "/" + d.Device
			if !got[want] {
				t.Errorf("claim does not report %q:\n%s", want, out)
			}
		}
		if !got["status.reservedFor=pods/"+name] {
			t.Errorf("claim does not report the pod it is reserved for:\n%s", out)
		}
	})
}

func testNode(name string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Allocatable = n.Status.Capacity
	return n
}

// testSlice is node's pool (named after the node) of n devices.
func testSlice(node string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver}}
	s.Spec.Driver = driver
	s.Spec.NodeName = &node
	s.Spec.Pool = resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}
	for i := range n {
		model, mem := "A100", "40Gi"
		if i%2 == 1 {
			model, mem = "H100", "80Gi"
		}
		idx := int64(i)
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("dev-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"model": {StringValue: &model}, "index": {IntValue: &idx},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: resource.MustParse(mem)}},
		})
	}
	return s
}

func createClaimAndPod(t *testing.T, ctx context.Context, c *apiserver.Cluster, ns, name, class string, count int64, selector string) {
	t.Helper()
	x := &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if selector != "" {
		x.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}}
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpu", Exactly: x}}
	if _, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}},
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.invalid/none",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitUnschedulable waits for the scheduler's PodScheduled=False condition
// and returns its message.
func waitUnschedulable(t *testing.T, ctx context.Context, c *apiserver.Cluster, ns, name string) string {
	t.Helper()
	var msg string
	took, err := apiserver.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				msg = cond.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: no scheduler verdict after %v: %v", ns, name, took, err)
	}
	t.Logf("scheduler on pod %s/%s after %v: %s", ns, name, took.Round(time.Millisecond), msg)
	return msg
}

func runClaim(t *testing.T, ctx context.Context, bin, kubeconfig, claim string) (jsonReport, string, int) {
	t.Helper()
	return runCmd(t, ctx, bin, "claim", "--kubeconfig", kubeconfig, "-o", "json", claim)
}

// runCmd runs accel-doctor ARGS (which ask for -o json) and decodes its
// report.
func runCmd(t *testing.T, ctx context.Context, bin string, args ...string) (jsonReport, string, int) {
	t.Helper()
	stdout, stderr, code := harness.Run(t, ctx, bin, args...)
	out := stdout + stderr
	var rep jsonReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: not JSON (%v), exit %d:\n%s", args, err, code, out)
	}
	return rep, out, code
}
