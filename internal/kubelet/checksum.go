package kubelet

import (
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
)

// The kubelet's checkpoint checksum, reproduced without importing
// k8s.io/kubernetes.
//
// pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go stores
// checksum.New(cp.Data): pkg/kubelet/checkpointmanager/checksum/checksum.go
// hashes with FNV-1a 32 (hash/fnv New32a) and widens Sum32 to uint64;
// what it hashes is hashutil.DeepHashObject(hash, data)
// (pkg/util/hash/hash.go), which writes k8s.io/utils/dump.ForHash(data):
// go-spew's Sprintf("%#v", data) with the ConfigState {Indent: " ",
// SortKeys: true, DisableMethods: true, SpewKeys: true,
// DisablePointerAddresses: true, DisableCapacities: true}. Older kubelets
// (before dump.ForHash) used the same ConfigState without the last two
// flags, which only change spew's Dump, not its formatter: the bytes
// hashed are the same in every kubelet since 1.10.
//
// spew's "%#v" (go-spew v1.1.1, format.go) prints a value as "(TYPE)"
// followed by the value, except where the type is implied: elements of a
// slice, and map keys and values, are printed without it. Struct fields
// are "Name:" then the field with its type, separated by one space, inside
// braces; slices are their elements separated by one space inside
// brackets; maps are "map[" then "key:value" pairs, keys sorted (ints
// numerically, strings bytewise), separated by one space, then "]"; a nil
// slice or map is "<nil>"; strings are written as they are (no quotes, no
// escaping); integers and bytes in decimal. TYPE is reflect's
// Type.String(), so the kubelet's own package name "checkpoint" and type
// names appear in what is hashed: the printer below writes them as
// literals. The checkpoint's types hold only strings, int64 map keys,
// string slices and byte slices, so this is all of spew that matters here.

// checksumV2 is the checksum the kubelet stores for d (current format).
func checksumV2(d *dataV2) uint64 {
	var b strings.Builder
	b.WriteString("(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)")
	if d.PodDeviceEntries == nil {
		b.WriteString("<nil>")
	} else {
		b.WriteByte('[')
		for i, e := range d.PodDeviceEntries {
			if i > 0 {
				b.WriteByte(' ')
			}
			writeEntryHead(&b, e.PodUID, e.ContainerName, e.ResourceName)
			b.WriteString(" DeviceIDs:(checkpoint.DevicesPerNUMA)")
			writeNUMAMap(&b, e.DeviceIDs)
			writeAllocResp(&b, e.AllocResp)
			b.WriteByte('}')
		}
		b.WriteByte(']')
	}
	writeRegistered(&b, d.RegisteredDevices)
	b.WriteByte('}')
	return fnv32a(b.String())
}

// checksumV1 is the checksum of a checkpoint written by kubelets up to
// 1.19, whose DeviceIDs were a plain list. Kubelets from 1.20 verify it
// (pkg/kubelet/cm/devicemanager/checkpoint/checkpointv1.go, from
// kubernetes PR 102717) by printing the V1 types, renaming
// "checkpointDataV1" to "checkpointData" once and every
// "PodDevicesEntryV1" to "PodDevicesEntry", and hashing that text: done
// the same way here, renames included, so that a device ID holding those
// words hashes as the kubelet hashes it.
func checksumV1(d *dataV1) uint64 {
	var b strings.Builder
	b.WriteString("(checkpoint.checkpointDataV1){PodDeviceEntries:([]checkpoint.PodDevicesEntryV1)")
	if d.PodDeviceEntries == nil {
		b.WriteString("<nil>")
	} else {
		b.WriteByte('[')
		for i, e := range d.PodDeviceEntries {
			if i > 0 {
				b.WriteByte(' ')
			}
			writeEntryHead(&b, e.PodUID, e.ContainerName, e.ResourceName)
			b.WriteString(" DeviceIDs:([]string)")
			writeStrings(&b, e.DeviceIDs)
			writeAllocResp(&b, e.AllocResp)
			b.WriteByte('}')
		}
		b.WriteByte(']')
	}
	writeRegistered(&b, d.RegisteredDevices)
	b.WriteByte('}')
	s := strings.Replace(b.String(), "checkpointDataV1", "checkpointData", 1)
	s = strings.ReplaceAll(s, "PodDevicesEntryV1", "PodDevicesEntry")
	return fnv32a(s)
}

func fnv32a(s string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return uint64(h.Sum32())
}

func writeEntryHead(b *strings.Builder, pod, container, resource string) {
	b.WriteString("{PodUID:(string)")
	b.WriteString(pod)
	b.WriteString(" ContainerName:(string)")
	b.WriteString(container)
	b.WriteString(" ResourceName:(string)")
	b.WriteString(resource)
}

func writeAllocResp(b *strings.Builder, r []byte) {
	b.WriteString(" AllocResp:([]uint8)")
	if r == nil {
		b.WriteString("<nil>")
		return
	}
	b.WriteByte('[')
	for i, c := range r {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(int(c)))
	}
	b.WriteByte(']')
}

// writeStrings prints a []string element of a struct field or map value.
func writeStrings(b *strings.Builder, ss []string) {
	if ss == nil {
		b.WriteString("<nil>")
		return
	}
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	b.WriteByte(']')
}

func writeNUMAMap(b *strings.Builder, m map[int64][]string) {
	if m == nil {
		b.WriteString("<nil>")
		return
	}
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	b.WriteString("map[")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(k, 10))
		b.WriteByte(':')
		writeStrings(b, m[k])
	}
	b.WriteByte(']')
}

func writeRegistered(b *strings.Builder, m map[string][]string) {
	b.WriteString(" RegisteredDevices:(map[string][]string)")
	if m == nil {
		b.WriteString("<nil>")
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("map[")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte(':')
		writeStrings(b, m[k])
	}
	b.WriteByte(']')
}
