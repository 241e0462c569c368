package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// PageSize is the Limit of every LIST: the page size kubectl uses
// (--chunk-size's default) and that the API server serves from its watch
// cache without going to etcd for each page.
const PageSize = 500

// ConfigOptions are kubectl's flags for reaching a cluster.
type ConfigOptions struct {
	Kubeconfig string // --kubeconfig; "" for $KUBECONFIG, then ~/.kube/config, then the in-cluster config
	Context    string // --context
	Namespace  string // -n; "" for every namespace
}

// RESTConfig resolves the options as kubectl does (clientcmd's loading
// rules: --kubeconfig, else $KUBECONFIG, else ~/.kube/config; a pod's
// service account when none of them exists) and asks for protobuf, which
// the API server encodes and client-go decodes several times faster than
// JSON for large lists. It returns the config and the server's name for
// the report.
func RESTConfig(o ConfigOptions) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "accel-doctor-cluster"
	// A few LISTs: client-go's default client-side limit (5 QPS) is
	// not what slows them, but keep it from throttling a large cluster's
	// pages.
	cfg.QPS, cfg.Burst = 50, 100
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	return cfg, cfg.Host, nil
}

// Lister is what Collect needs of the API server: one page of a LIST.
type Lister interface {
	Nodes(ctx context.Context, o metav1.ListOptions) (*corev1.NodeList, error)
	Pods(ctx context.Context, namespace string, o metav1.ListOptions) (*corev1.PodList, error)
	Events(ctx context.Context, namespace string, o metav1.ListOptions) (*corev1.EventList, error)
}

// Client lists core/v1 objects with a REST client whose scheme holds
// core/v1 alone. client-go's typed clients go through
// k8s.io/client-go/kubernetes/scheme, which registers every API group
// there is: 27 MB more in the binary for three LISTs.
type Client struct {
	rc     rest.Interface
	params runtime.ParameterCodec
}

// NewClient returns a Client for cfg (from RESTConfig).
func NewClient(cfg *rest.Config) (*Client, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{rc: rc, params: runtime.NewParameterCodec(s)}, nil
}

func (c *Client) list(ctx context.Context, namespace, resource string, o metav1.ListOptions, into runtime.Object) error {
	return c.rc.Get().Namespace(namespace).Resource(resource).
		VersionedParams(&o, c.params).Do(ctx).Into(into)
}

// Nodes is one page of LIST /api/v1/nodes.
func (c *Client) Nodes(ctx context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	l := &corev1.NodeList{}
	return l, c.list(ctx, "", "nodes", o, l)
}

// Pods is one page of LIST /api/v1/[namespaces/NS/]pods.
func (c *Client) Pods(ctx context.Context, namespace string, o metav1.ListOptions) (*corev1.PodList, error) {
	l := &corev1.PodList{}
	return l, c.list(ctx, namespace, "pods", o, l)
}

// Events is one page of LIST /api/v1/[namespaces/NS/]events.
func (c *Client) Events(ctx context.Context, namespace string, o metav1.ListOptions) (*corev1.EventList, error) {
	l := &corev1.EventList{}
	return l, c.list(ctx, namespace, "events", o, l)
}

// Collect lists the cluster's Nodes, Pods (of namespace, or all) and
// FailedScheduling Events into a, a page at a time. The three LISTs run
// at once (each is a chain of pages, and a page's round trip is mostly
// the server's encoding and the client's decoding, which overlap across
// LISTs); a page is fed to a under a lock, so a is used by one goroutine
// at a time. A LIST that fails is recorded in a (ListFailed) and the
// others go on: what they show stands.
func Collect(ctx context.Context, c Lister, namespace string, a *Analyzer) error {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	run := func(what, resource string, list func(context.Context, metav1.ListOptions) (string, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ListPages(ctx, what, list); err != nil {
				mu.Lock()
				ns := namespace
				if resource == "nodes" {
					ns = "" // cluster-scoped
				}
				a.ListFailed(what, Listing(resource, "v1", ns, resource != "nodes" && ns == "", err))
				mu.Unlock()
			}
		}()
	}
	run("nodes", "nodes", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.Nodes(ctx, o)
		if err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range l.Items {
			a.AddNode(&l.Items[i])
		}
		return l.Continue, nil
	})
	run(listName("pods", namespace), "pods", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := c.Pods(ctx, namespace, o)
		if err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range l.Items {
			a.AddPod(&l.Items[i])
		}
		return l.Continue, nil
	})
	// Only the scheduler's rejections: the API server filters events by
	// reason (one of the fields it selects events on,
	// pkg/registry/core/event/strategy.go ToSelectableFields).
	sel := fields.OneTermEqualSelector("reason", "FailedScheduling").String()
	run(listName("events", namespace), "events", func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.FieldSelector = sel
		l, err := c.Events(ctx, namespace, o)
		if err != nil {
			return "", err
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range l.Items {
			a.AddEvent(&l.Items[i])
		}
		return l.Continue, nil
	})
	wg.Wait()
	// The LISTs finish in any order: the failures are reported in a
	// fixed one.
	sort.Slice(a.listErrs, func(i, j int) bool { return a.listErrs[i].what < a.listErrs[j].what })
	return ctx.Err()
}

func listName(what, namespace string) string {
	if namespace == "" {
		return what + " (all namespaces)"
	}
	return what + " (namespace " + namespace + ")"
}

// maxPages bounds one LIST: 10,000 pages of PageSize is 5 million objects,
// far past what an API server holds; a server that keeps answering with a
// continue token past it is not ending its list.
const maxPages = 10000

// ListPages calls page with Limit PageSize and each continue token until
// the list ends (every paged LIST of cluster, claim and lint goes through
// it). An expired token (410 Gone: the list took longer than the API
// server keeps the compacted revision, 5 minutes in etcd's default) is an
// error: the pages read so far are kept. what names the list in the error
// of a list that does not end.
func ListPages(ctx context.Context, what string, page func(context.Context, metav1.ListOptions) (string, error)) error {
	opts := metav1.ListOptions{Limit: PageSize}
	for i := 0; ; i++ {
		if i == maxPages {
			return fmt.Errorf("more than %d pages of %d %s: stopped", maxPages, PageSize, what)
		}
		cont, err := page(ctx, opts)
		if err != nil {
			return err
		}
		if cont == "" {
			return nil
		}
		opts.Continue = cont
	}
}
