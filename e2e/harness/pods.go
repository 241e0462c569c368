package harness

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod is a pod with one container, "ctr", that asks for n of resource:
// limits only, as an extended resource must be asked for (requests, when
// given, must equal limits; the manager reads limits).
func Pod(name, resourceName string, n int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "ctr",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
				v1.ResourceName(resourceName): *resource.NewQuantity(n, resource.DecimalSI),
			}},
		}}},
	}
}
