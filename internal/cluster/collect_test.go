package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pages serves lists of n objects in pages of Limit, with the continue
// token as the offset, and records the requests: what Collect asks of an
// API server, not a model of one (the e2e tests use the real one).
type pages struct {
	mu       sync.Mutex
	nodes    int
	pods     int
	eventErr error
	requests []string
}

func (p *pages) page(what string, n int, o metav1.ListOptions) (from, to int, cont string, err error) {
	p.mu.Lock()
	p.requests = append(p.requests, fmt.Sprintf("%s limit=%d continue=%q fields=%q", what, o.Limit, o.Continue, o.FieldSelector))
	p.mu.Unlock()
	if o.Limit <= 0 {
		return 0, 0, "", errors.New("no limit")
	}
	if o.Continue != "" {
		if from, err = strconv.Atoi(o.Continue); err != nil {
			return 0, 0, "", err
		}
	}
	to = min(from+int(o.Limit), n)
	if to < n {
		cont = strconv.Itoa(to)
	}
	return from, to, cont, nil
}

func (p *pages) Nodes(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	from, to, cont, err := p.page("nodes", p.nodes, o)
	if err != nil {
		return nil, err
	}
	l := &corev1.NodeList{ListMeta: metav1.ListMeta{Continue: cont}}
	for i := from; i < to; i++ {
		l.Items = append(l.Items, *node(fmt.Sprintf("n%04d", i), map[string][2]string{"nvidia.com/gpu": {"8", "8"}}, nil, nil))
	}
	return l, nil
}

func (p *pages) Pods(_ context.Context, ns string, o metav1.ListOptions) (*corev1.PodList, error) {
	from, to, cont, err := p.page("pods/"+ns, p.pods, o)
	if err != nil {
		return nil, err
	}
	l := &corev1.PodList{ListMeta: metav1.ListMeta{Continue: cont}}
	for i := from; i < to; i++ {
		l.Items = append(l.Items, *pending(fmt.Sprintf("p%04d", i), "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."))
	}
	return l, nil
}

func (p *pages) Events(_ context.Context, ns string, o metav1.ListOptions) (*corev1.EventList, error) {
	if _, _, _, err := p.page("events/"+ns, 0, o); err != nil {
		return nil, err
	}
	if p.eventErr != nil {
		return nil, p.eventErr
	}
	return &corev1.EventList{}, nil
}

func TestCollectPages(t *testing.T) {
	p := &pages{nodes: 1200, pods: 501, eventErr: errors.New(`events is forbidden`)}
	a := NewAnalyzer()
	a.Now = testNow
	if err := Collect(context.Background(), p, "ml", a); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range p.requests {
		count[r]++
	}
	for _, want := range []string{
		`nodes limit=500 continue="" fields=""`, `nodes limit=500 continue="500" fields=""`, `nodes limit=500 continue="1000" fields=""`,
		`pods/ml limit=500 continue="" fields=""`, `pods/ml limit=500 continue="500" fields=""`,
		`events/ml limit=500 continue="" fields="reason=FailedScheduling"`,
	} {
		if count[want] != 1 {
			t.Errorf("request %s made %d times; all requests: %q", want, count[want], p.requests)
		}
	}
	if len(p.requests) != 6 {
		t.Errorf("%d requests, want 6: %q", len(p.requests), p.requests)
	}
	fs := a.Findings()
	var ok, pend, failed int
	for _, f := range fs {
		switch f.Code {
		case "CLUSTER_NODE_OK":
			ok++
		case "CLUSTER_PENDING_INSUFFICIENT":
			pend++
			if f.Summary != "501 pod(s) Pending: Insufficient nvidia.com/gpu" {
				t.Errorf("summary %q", f.Summary)
			}
		case "CLUSTER_LIST_FAILED":
			failed++
			if f.Subject != "events (namespace ml)" {
				t.Errorf("subject %q", f.Subject)
			}
		}
	}
	if ok != 1200 || pend != 1 || failed != 1 || len(fs) != 1202 {
		t.Errorf("%d findings: %d nodes OK, %d pending groups, %d failed lists", len(fs), ok, pend, failed)
	}
}

// ListPages (every paged LIST: cluster's, claim's and lint's) asks with
// Limit PageSize, goes on with each continue token, stops at the empty
// one, returns a page's error as it is, and stops a server that never ends
// its list after maxPages pages, naming the list.
func TestListPages(t *testing.T) {
	ctx := context.Background()
	var tokens []string
	err := ListPages(ctx, "things", func(_ context.Context, o metav1.ListOptions) (string, error) {
		if o.Limit != PageSize {
			t.Errorf("Limit %d, want %d", o.Limit, PageSize)
		}
		tokens = append(tokens, o.Continue)
		if len(tokens) == 3 {
			return "", nil
		}
		return fmt.Sprintf("t%d", len(tokens)), nil
	})
	if err != nil || strings.Join(tokens, ",") != ",t1,t2" {
		t.Errorf("tokens %q, %v", tokens, err)
	}
	gone := errors.New("410 Gone")
	if err := ListPages(ctx, "things", func(context.Context, metav1.ListOptions) (string, error) { return "", gone }); err != gone {
		t.Errorf("a page's error: %v", err)
	}
	calls := 0
	err = ListPages(ctx, "things", func(context.Context, metav1.ListOptions) (string, error) { calls++; return "again", nil })
	if err == nil || calls != maxPages || !strings.Contains(err.Error(), "things") {
		t.Errorf("a list that never ends: %d pages, %v", calls, err)
	}
}
