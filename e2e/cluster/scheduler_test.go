package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/apiserver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

const devResource corev1.ResourceName = "example.com/dev"

// TestSchedulerExtendedResource proves the harness: the real scheduler
// rejects a Pod asking for 2 of a resource the only node has 1 of, with
// its own FailedScheduling event, and binds a Pod asking for 1. It also
// checks that DRA's API, resource.k8s.io/v1, is served.
func TestSchedulerExtendedResource(t *testing.T) {
	c := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := c.Client.Discovery().ServerResourcesForGroupVersion("resource.k8s.io/v1"); err != nil {
		t.Errorf("resource.k8s.io/v1 (DRA) is not served: %v", err)
	}

	const ns = "sched"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	node, err := c.CreateNode(ctx, testNode("node-a", map[corev1.ResourceName]string{devResource: "1"}, map[corev1.ResourceName]string{devResource: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, taint := range node.Spec.Taints {
		t.Errorf("node keeps taint %v", taint)
	}

	big, err := c.Client.CoreV1().Pods(ns).Create(ctx, testPod("wants-2", devResource, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ev *corev1.Event
	took, err := apiserver.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": big.Name, "involvedObject.uid": string(big.UID), "reason": "FailedScheduling",
		}.String()})
		if err != nil {
			return false, err
		}
		if len(evs.Items) > 0 {
			ev = &evs.Items[0]
		}
		return ev != nil, nil
	})
	if err != nil {
		t.Fatalf("no FailedScheduling event for pod %s after %v: %v", big.Name, took, err)
	}
	t.Logf("FailedScheduling after %v from %s: %q", took.Round(time.Millisecond), ev.ReportingController, ev.Message)
	// The scheduler's words (pkg/scheduler/framework/plugins/noderesources
	// "Insufficient %v", summed by schedule_one.go's FitError), then the
	// preemption plugin's verdict.
	const want = "0/1 nodes are available: 1 Insufficient example.com/dev. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
	if ev.Message != want {
		t.Errorf("FailedScheduling message:\n got %q\nwant %q", ev.Message, want)
	}
	if ev.Type != corev1.EventTypeWarning || ev.ReportingController != "default-scheduler" {
		t.Errorf("event type %q from %q, want Warning from default-scheduler", ev.Type, ev.ReportingController)
	}
	// The Pod's own condition says the same. The scheduler records the
	// event and patches the condition in two calls, one after the other
	// (schedule_one.go, handleSchedulingFailure): wait for the second.
	var p *corev1.Pod
	if _, err := apiserver.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		if p, err = c.Client.CoreV1().Pods(ns).Get(ctx, big.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		return podCondition(p, corev1.PodScheduled) != nil, nil
	}); err != nil && p == nil {
		t.Fatal(err)
	}
	if cond := podCondition(p, corev1.PodScheduled); cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != corev1.PodReasonUnschedulable {
		t.Errorf("pod %s: PodScheduled condition %+v, want False/Unschedulable", p.Name, cond)
	} else if cond.Message != want {
		t.Errorf("PodScheduled message:\n got %q\nwant %q", cond.Message, want)
	}

	small, err := c.Client.CoreV1().Pods(ns).Create(ctx, testPod("wants-1", devResource, 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	took, err = apiserver.WaitFor(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, small.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Spec.NodeName != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s not bound after %v: %v", small.Name, took, err)
	}
	p, err = c.Client.CoreV1().Pods(ns).Get(ctx, small.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != node.Name {
		t.Errorf("pod %s bound to %q, want %q", p.Name, p.Spec.NodeName, node.Name)
	}
	t.Logf("pod %s bound to %s after %v", p.Name, p.Spec.NodeName, took.Round(time.Millisecond))
	if rss, err := apiserver.PeakRSS(); err == nil {
		t.Logf("peak RSS of the test process (etcd, kube-apiserver, kube-scheduler and the test): %d MiB", rss>>20)
	}
}

func testNode(name string, capacity, allocatable map[corev1.ResourceName]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.Capacity = resources(capacity)
	n.Status.Allocatable = resources(allocatable)
	return n
}

// resources is the node's resources plus the CPU, memory and pod count a
// kubelet always reports (the scheduler's NodeResourcesFit rejects a node
// with no pods capacity).
func resources(extra map[corev1.ResourceName]string) corev1.ResourceList {
	l := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for k, v := range extra {
		l[k] = resource.MustParse(v)
	}
	return l
}

func testPod(name string, res corev1.ResourceName, n int) *corev1.Pod {
	q := resource.MustParse(fmt.Sprint(n))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.invalid/none",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{res: q},
				Limits:   corev1.ResourceList{res: q},
			},
		}}},
	}
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
