package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
)

// API is what the agent writes to, and reads of, its node.
type API interface {
	// Condition reads the node's AcceleratorsReady condition (ok false
	// when the node has none).
	Condition(ctx context.Context) (c Condition, since time.Time, ok bool, err error)
	// PatchCondition sets the condition on the node's status.
	PatchCondition(ctx context.Context, c Condition, since, now time.Time) error
	// Annotate sets the summary annotation on the node.
	Annotate(ctx context.Context, s cluster.Summary) error
	// Event records the transition to c.
	Event(ctx context.Context, c Condition, now time.Time) error
}

// Client is the API over a REST client whose scheme holds core/v1 alone
// (as internal/cluster's, and for the same reason: client-go's typed
// clientset registers every API group, megabytes for four calls).
type Client struct {
	rc   rest.Interface
	node string
	// uid is the node's UID, read with the condition, for Events'
	// involvedObject.
	uid types.UID
}

// NewClient returns a Client for node over cfg.
func NewClient(cfg *rest.Config, node string) (*Client, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	// A slow API server must not hold a publication past the next run:
	// each call gives up after this, and the agent backs off.
	if cfg.Timeout == 0 || cfg.Timeout > 15*time.Second {
		cfg.Timeout = 15 * time.Second
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{rc: rc, node: node}, nil
}

// Condition reads GET /api/v1/nodes/NODE.
func (c *Client) Condition(ctx context.Context) (Condition, time.Time, bool, error) {
	n := &corev1.Node{}
	if err := c.rc.Get().Resource("nodes").Name(c.node).Do(ctx).Into(n); err != nil {
		return Condition{}, time.Time{}, false, fmt.Errorf("get node %s: %w", c.node, err)
	}
	c.uid = n.UID
	for _, nc := range n.Status.Conditions {
		if nc.Type == ConditionType {
			return Condition{Status: string(nc.Status), Reason: nc.Reason, Message: nc.Message}, nc.LastTransitionTime.Time, true, nil
		}
	}
	return Condition{}, time.Time{}, false, nil
}

// PatchCondition is a strategic-merge PATCH of the status subresource:
// NodeStatus.conditions merges by type (patchMergeKey "type" in
// k8s.io/api/core/v1/types.go), so this touches the agent's condition
// and no other (the kubelet's Ready, node-problem-detector's).
func (c *Client) PatchCondition(ctx context.Context, cond Condition, since, now time.Time) error {
	patch := map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: ConditionType, Status: corev1.ConditionStatus(cond.Status), Reason: cond.Reason, Message: cond.Message,
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(since),
	}}}}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := c.rc.Patch(types.StrategicMergePatchType).Resource("nodes").Name(c.node).SubResource("status").Body(b).Do(ctx).Error(); err != nil {
		return fmt.Errorf("patch node %s status: %w", c.node, err)
	}
	return nil
}

// Annotate is a merge PATCH of the node's metadata.annotations with the
// summary annotation alone.
func (c *Client) Annotate(ctx context.Context, s cluster.Summary) error {
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{cluster.SummaryAnnotation: string(v)}}})
	if err != nil {
		return err
	}
	if err := c.rc.Patch(types.MergePatchType).Resource("nodes").Name(c.node).Body(b).Do(ctx).Error(); err != nil {
		return fmt.Errorf("annotate node %s: %w", c.node, err)
	}
	return nil
}

// EventNamespace is where Events about a Node go: a Node has no namespace,
// and the kubelet records its own node's Events in "default" (its event
// recorder's object reference for the node, pkg/kubelet/kubelet.go).
const EventNamespace = "default"

// Event creates a core/v1 Event about the node: reason the condition's
// reason (the first failing code), type Warning unless the node became
// ready.
func (c *Client) Event(ctx context.Context, cond Condition, now time.Time) error {
	t := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: c.node + ".accel-doctor.", Namespace: EventNamespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Node", APIVersion: "v1", Name: c.node, UID: c.uid,
		},
		Reason:  cond.Reason,
		Message: fmt.Sprintf("%s is %s: %s", ConditionType, cond.Status, cond.Message),
		Type:    cond.EventType(),
		Source:  corev1.EventSource{Component: "accel-doctor-agent", Host: c.node},
		Count:   1, FirstTimestamp: t, LastTimestamp: t,
	}
	if err := c.rc.Post().Namespace(EventNamespace).Resource("events").Body(ev).Do(ctx).Error(); err != nil {
		return fmt.Errorf("create event for node %s: %w", c.node, err)
	}
	return nil
}
