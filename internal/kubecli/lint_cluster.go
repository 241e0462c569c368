package kubecli

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/accel-doctor/accel-doctor/internal/claim"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/lint"
)

// lintCluster reads what lint --cluster's rules need: RuntimeClasses,
// DeviceClasses and Nodes, each once with paged LISTs (cluster.PageSize),
// at the same time. A LIST that fails is recorded with its error (the
// rules that need it are then NOT_RUN); the others stand.
func lintCluster(ctx context.Context, cfg *rest.Config, host string) (*lint.Cluster, error) {
	dra, err := claim.NewClient(cfg) // DeviceClasses, and Nodes through cluster.Client
	if err != nil {
		return nil, err
	}
	rcs, err := newRuntimeClassClient(cfg)
	if err != nil {
		return nil, err
	}
	c := &lint.Cluster{Server: host, Why: cluster.APIWhy}
	var wg sync.WaitGroup
	wg.Go(func() {
		names, err := rcs.names(ctx)
		c.RuntimeClasses, c.RuntimeClassesErr = names, cluster.Listing("runtimeclasses.node.k8s.io", "node.k8s.io/v1", "", false, err)
	})
	wg.Go(func() {
		classes, err := dra.Classes(ctx)
		c.DeviceClassesErr = cluster.Listing("deviceclasses.resource.k8s.io", "resource.k8s.io/v1", "", false, err)
		for _, d := range classes {
			c.DeviceClasses = append(c.DeviceClasses, d.Name)
		}
	})
	wg.Go(func() {
		nodes, err := dra.Nodes(ctx)
		c.NodesErr = cluster.Listing("nodes", "v1", "", false, err)
		c.Nodes = make([]corev1.Node, 0, len(nodes))
		for _, n := range nodes {
			c.Nodes = append(c.Nodes, *n)
		}
	})
	wg.Wait()
	return c, nil
}

// runtimeClassClient lists node.k8s.io/v1 RuntimeClasses with a REST
// client whose scheme holds that group alone (as cluster.Client and
// claim.Client do for theirs).
type runtimeClassClient struct {
	rc     rest.Interface
	params runtime.ParameterCodec
}

func newRuntimeClassClient(cfg *rest.Config) (*runtimeClassClient, error) {
	s := runtime.NewScheme()
	if err := nodev1.AddToScheme(s); err != nil {
		return nil, err
	}
	rcfg := rest.CopyConfig(cfg)
	rcfg.GroupVersion = &nodev1.SchemeGroupVersion
	rcfg.APIPath = "/apis"
	rcfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	rc, err := rest.RESTClientFor(rcfg)
	if err != nil {
		return nil, err
	}
	return &runtimeClassClient{rc: rc, params: runtime.NewParameterCodec(s)}, nil
}

func (c *runtimeClassClient) names(ctx context.Context) ([]string, error) {
	var out []string
	err := cluster.ListPages(ctx, "RuntimeClasses", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l := &nodev1.RuntimeClassList{}
		if err := c.rc.Get().Resource("runtimeclasses").VersionedParams(&o, c.params).Do(ctx).Into(l); err != nil {
			return "", err
		}
		for _, r := range l.Items {
			out = append(out, r.Name)
		}
		return l.Continue, nil
	})
	return out, err
}
