package claim

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/accel-doctor/accel-doctor/internal/cluster"
)

// Client reads resource.k8s.io/v1 objects with a REST client whose scheme
// holds that group alone (as cluster.Client does for core/v1: client-go's
// typed clientset registers every API group), and Nodes through
// cluster.Client.
type Client struct {
	rc     rest.Interface
	params runtime.ParameterCodec
	core   *cluster.Client
}

// NewClient returns a Client for cfg (from cluster.RESTConfig).
func NewClient(cfg *rest.Config) (*Client, error) {
	s := runtime.NewScheme()
	if err := resourceapi.AddToScheme(s); err != nil {
		return nil, err
	}
	rcfg := rest.CopyConfig(cfg)
	rcfg.GroupVersion = &resourceapi.SchemeGroupVersion
	rcfg.APIPath = "/apis"
	rcfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	rc, err := rest.RESTClientFor(rcfg)
	if err != nil {
		return nil, err
	}
	core, err := cluster.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{rc: rc, params: runtime.NewParameterCodec(s), core: core}, nil
}

// Claim is GET of one ResourceClaim.
func (c *Client) Claim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	rc := &resourceapi.ResourceClaim{}
	return rc, c.rc.Get().Namespace(namespace).Resource("resourceclaims").Name(name).Do(ctx).Into(rc)
}

func (c *Client) list(ctx context.Context, resource string, o metav1.ListOptions, into runtime.Object) error {
	return c.rc.Get().Resource(resource).VersionedParams(&o, c.params).Do(ctx).Into(into)
}

// Slices lists every ResourceSlice.
func (c *Client) Slices(ctx context.Context) ([]*resourceapi.ResourceSlice, error) {
	var out []*resourceapi.ResourceSlice
	err := cluster.ListPages(ctx, "ResourceSlices", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l := &resourceapi.ResourceSliceList{}
		if err := c.list(ctx, "resourceslices", o, l); err != nil {
			return "", err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return l.Continue, nil
	})
	return out, err
}

// Classes lists every DeviceClass.
func (c *Client) Classes(ctx context.Context) ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	err := cluster.ListPages(ctx, "DeviceClasses", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l := &resourceapi.DeviceClassList{}
		if err := c.list(ctx, "deviceclasses", o, l); err != nil {
			return "", err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return l.Continue, nil
	})
	return out, err
}

// Claims lists the ResourceClaims of every namespace.
func (c *Client) Claims(ctx context.Context) ([]*resourceapi.ResourceClaim, error) {
	var out []*resourceapi.ResourceClaim
	err := cluster.ListPages(ctx, "ResourceClaims", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l := &resourceapi.ResourceClaimList{}
		if err := c.list(ctx, "resourceclaims", o, l); err != nil {
			return "", err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return l.Continue, nil
	})
	return out, err
}

// Nodes lists every Node.
func (c *Client) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	var out []*corev1.Node
	err := cluster.ListPages(ctx, "Nodes", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.core.Nodes(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return l.Continue, nil
	})
	return out, err
}

// Gather reads the claim and, when it is not allocated, what explains it:
// the classes, slices, claims and nodes, listed at once. A failed LIST of
// nodes is not fatal: Input.NodesErr says why, and Nodes is empty (the
// pages read before the failure are not the cluster's nodes); any other
// failure is.
func Gather(ctx context.Context, c *Client, namespace, name string) (in Input, err error) {
	in.Claim, err = c.Claim(ctx, namespace, name)
	if err != nil {
		return in, fmt.Errorf("get resourceclaim %s/%s: %w", namespace, name,
			&cluster.RequestError{Verb: "get", Resource: "resourceclaims.resource.k8s.io", API: "resource.k8s.io/v1", Namespace: namespace, Name: name, Err: err})
	}
	if in.Claim.Status.Allocation != nil {
		return in, nil
	}
	var (
		wg   sync.WaitGroup
		errs [4]error
	)
	wg.Add(4)
	go func() { defer wg.Done(); in.Classes, errs[0] = c.Classes(ctx) }()
	go func() { defer wg.Done(); in.Slices, errs[1] = c.Slices(ctx) }()
	go func() { defer wg.Done(); in.Claims, errs[2] = c.Claims(ctx) }()
	go func() { defer wg.Done(); in.Nodes, errs[3] = c.Nodes(ctx) }()
	wg.Wait()
	for i, what := range []string{"deviceclasses", "resourceslices", "resourceclaims"} {
		if errs[i] != nil {
			return in, fmt.Errorf("list %s: %w", what, cluster.Listing(what+".resource.k8s.io", "resource.k8s.io/v1", "", what == "resourceclaims", errs[i]))
		}
	}
	if errs[3] != nil {
		in.Nodes, in.NodesErr, in.NodesError = nil, fmt.Sprintf("list nodes: %v", errs[3]), cluster.Listing("nodes", "v1", "", false, errs[3])
	}
	return in, nil
}
