package dramock

import (
	"context"
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	resourcev1beta1 "k8s.io/client-go/kubernetes/typed/resource/v1beta1"
	resourcev1beta2 "k8s.io/client-go/kubernetes/typed/resource/v1beta2"
)

// memClient is the API server as far as kubeletplugin needs one without
// publishing: Get of a ResourceClaim (nodePluginImplementation.
// getResourceClaims, through k8s.io/dynamic-resource-allocation/client),
// answered from the claims the mock holds. client-go's fake clientset
// would do the same and adds about 40 MB to the binary (every API group's
// fake and apply configuration); this is the one call. Any other method
// panics on the nil embedded interface: kubeletplugin calls none of them
// unless PublishResources is called, which the mock does only with a
// real client.
type memClient struct {
	kubernetes.Interface
	claims *claimStore
}

type claimStore struct {
	mu sync.Mutex
	m  map[string]*resourceapi.ResourceClaim // NAMESPACE/NAME
}

func newMemClient() *memClient {
	return &memClient{claims: &claimStore{m: map[string]*resourceapi.ResourceClaim{}}}
}

func (s *claimStore) put(c *resourceapi.ResourceClaim) {
	s.mu.Lock()
	s.m[c.Namespace+"/"+c.Name] = c.DeepCopy()
	s.mu.Unlock()
}

func (c *memClient) ResourceV1() resourcev1.ResourceV1Interface { return memV1{claims: c.claims} }

// The client wrapper builds its v1beta1 and v1beta2 claim clients
// eagerly and uses them only when v1 answers that the API is missing,
// which memV1 never does.
func (c *memClient) ResourceV1beta1() resourcev1beta1.ResourceV1beta1Interface { return memV1beta1{} }
func (c *memClient) ResourceV1beta2() resourcev1beta2.ResourceV1beta2Interface { return memV1beta2{} }

type memV1 struct {
	resourcev1.ResourceV1Interface
	claims *claimStore
}

func (v memV1) ResourceClaims(ns string) resourcev1.ResourceClaimInterface {
	return memClaims{ns: ns, claims: v.claims}
}

type memV1beta1 struct {
	resourcev1beta1.ResourceV1beta1Interface
}

func (memV1beta1) ResourceClaims(string) resourcev1beta1.ResourceClaimInterface { return nil }

type memV1beta2 struct {
	resourcev1beta2.ResourceV1beta2Interface
}

func (memV1beta2) ResourceClaims(string) resourcev1beta2.ResourceClaimInterface { return nil }

type memClaims struct {
	resourcev1.ResourceClaimInterface
	ns     string
	claims *claimStore
}

func (m memClaims) Get(_ context.Context, name string, _ metav1.GetOptions) (*resourceapi.ResourceClaim, error) {
	m.claims.mu.Lock()
	defer m.claims.mu.Unlock()
	c, ok := m.claims.m[m.ns+"/"+name]
	if !ok {
		// Not apierrors.NotFound: that would send the wrapper to the
		// older API versions.
		return nil, fmt.Errorf("mock: no claim %s/%s held (the kubelet side did not ask to prepare it)", m.ns, name)
	}
	return c.DeepCopy(), nil
}
