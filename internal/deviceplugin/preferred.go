package deviceplugin

import (
	"fmt"
	"slices"
	"sort"
)

// Distances between two devices, in the order nvidia-smi topo -m ranks
// links (PIX < PXB < PHB < NODE < SYS): on one PCIe tree the number of
// bridges between them; across host bridges of one NUMA node, farther
// than any tree; across NUMA nodes, farther still. The kubelet's
// topology manager aligns NUMA before it asks (manager.go
// devicesToAllocate: filterByAffinity, then GetPreferredAllocation over
// the aligned set), so within its answer the NUMA term rarely decides;
// without a topology manager policy it does.
const (
	distOtherHostBridge = 100
	distOtherNUMA       = 1000
	distUnknown         = 500 // no topology known for one of the two
)

// distance is the cost of putting a and b in one allocation.
func distance(a, b *Device) int {
	if a == b {
		return 0
	}
	if a.NUMA >= 0 && b.NUMA >= 0 && a.NUMA != b.NUMA {
		return distOtherNUMA
	}
	if a.HostBridge == "" || b.HostBridge == "" || a.PCI == nil || b.PCI == nil {
		if a.NUMA >= 0 && a.NUMA == b.NUMA {
			return distOtherHostBridge
		}
		return distUnknown
	}
	if a.HostBridge != b.HostBridge {
		return distOtherHostBridge
	}
	// Same PCIe tree: hops up from each to their deepest common bridge.
	common := 0
	for common < len(a.Bridges) && common < len(b.Bridges) && a.Bridges[common] == b.Bridges[common] {
		common++
	}
	return len(a.Bridges) - common + len(b.Bridges) - common + 1
}

// preferred picks size devices from available, every mustInclude among
// them, keeping the set close: the must-include devices (or, without
// them, each available device in turn) seed a set that grows by the
// device closest to it (least summed distance, then lowest ID); the
// cheapest set wins. It is O(n^2 * size) for n available devices, which
// for the 8-16 devices of a node is microseconds.
func preferred(devs map[string]*Device, available, mustInclude []string, size int) ([]string, error) {
	if size <= 0 {
		return nil, fmt.Errorf("allocation size %d", size)
	}
	avail := dedupe(available)
	must := dedupe(mustInclude)
	if len(must) > size {
		return nil, fmt.Errorf("%d must-include devices exceed the allocation size %d", len(must), size)
	}
	for _, id := range append(slices.Clone(avail), must...) {
		if devs[id] == nil {
			return nil, fmt.Errorf("unknown device %q", id)
		}
	}
	pool := map[string]bool{}
	for _, id := range avail {
		pool[id] = true
	}
	for _, id := range must {
		pool[id] = true // a must-include device is taken even when not offered as available
	}
	if len(pool) < size {
		return nil, fmt.Errorf("allocation size %d exceeds the %d devices available", size, len(pool))
	}
	ids := make([]string, 0, len(pool))
	for id := range pool {
		ids = append(ids, id)
	}
	sort.Strings(ids)

	grow := func(seed []string) ([]string, int) {
		set := slices.Clone(seed)
		in := map[string]bool{}
		for _, id := range set {
			in[id] = true
		}
		cost := 0
		for i := range set {
			for j := i + 1; j < len(set); j++ {
				cost += distance(devs[set[i]], devs[set[j]])
			}
		}
		for len(set) < size {
			best, bestCost := "", -1
			for _, id := range ids {
				if in[id] {
					continue
				}
				c := 0
				for _, s := range set {
					c += distance(devs[id], devs[s])
				}
				if bestCost < 0 || c < bestCost {
					best, bestCost = id, c
				}
			}
			set = append(set, best)
			in[best] = true
			cost += bestCost
		}
		return set, cost
	}
	if len(must) > 0 {
		set, _ := grow(must)
		return set, nil
	}
	var best []string
	bestCost := -1
	for _, id := range ids {
		set, c := grow([]string{id})
		if bestCost < 0 || c < bestCost {
			best, bestCost = set, c
		}
	}
	return best, nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(s))
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
