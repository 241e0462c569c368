package kubelet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// CheckpointName is the device manager's checkpoint, in its socket
// directory (pkg/kubelet/cm/devicemanager/types.go,
// kubeletDeviceManagerCheckpoint).
const CheckpointName = "kubelet_internal_checkpoint"

// MaxCheckpointSize bounds what is read of a checkpoint. A node's
// checkpoint holds one entry per container and resource, each with the
// plugin's AllocateResponse (device specs, mounts, environment): a few KiB
// per container, well under 1 MiB for a node's 110 pods (the kubelet's
// default --max-pods). Anything larger is not read.
const MaxCheckpointSize = 16 << 20

// CheckpointFormat names the layout a checkpoint was written in.
type CheckpointFormat string

const (
	// FormatV2 is the layout of kubelets since 1.20: DeviceIDs is a map
	// from NUMA node (-1: no topology) to IDs
	// (pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go, DevicesPerNUMA).
	FormatV2 CheckpointFormat = "v2"
	// FormatV2BootID is FormatV2 with the BootID field beside Data and
	// Checksum, written by kubelets newer than 1.37 (upstream master after
	// v1.37.2, commit 11626e98 of checkpoint.go): BootID is outside Data,
	// so the checksum is the same as FormatV2's.
	FormatV2BootID CheckpointFormat = "v2+bootid"
	// FormatV1 is the layout of kubelets up to 1.19: DeviceIDs is a list
	// (checkpointv1.go, PodDevicesEntryV1). Kubelets 1.20 and later read it
	// once and rewrite it as v2; v1.37.2 no longer carries the V1 reader,
	// so a current kubelet fails to read it and starts without the
	// allocations it holds.
	FormatV1 CheckpointFormat = "v1"
)

// Checkpoint is what a kubelet_internal_checkpoint says.
type Checkpoint struct {
	Format CheckpointFormat `json:"format"`
	// Stored is the Checksum field; Computed is the kubelet's checksum of
	// the Data read. ChecksumOK is their equality: the kubelet refuses a
	// checkpoint whose checksums differ (checkpointmanager.GetCheckpoint
	// returns CorruptCheckpointError) and starts without its allocations.
	Stored     uint64 `json:"stored"`
	Computed   uint64 `json:"computed"`
	ChecksumOK bool   `json:"checksum_ok"`
	// BootID is the kernel boot_id the kubelet recorded ("" when the
	// format has none).
	BootID string `json:"boot_id,omitempty"`
	// Entries are the allocations, one per pod, container and resource,
	// in file order.
	Entries []Allocation `json:"entries,omitempty"`
	// Registered is Data.RegisteredDevices: per resource, the device IDs
	// that were healthy when the kubelet last wrote the checkpoint
	// (writeCheckpoint in pkg/kubelet/cm/devicemanager/manager.go writes
	// healthyDevices). An empty list is a resource known from an earlier
	// checkpoint whose plugin has not reported since the kubelet started.
	Registered map[string][]string `json:"registered,omitempty"`
}

// Allocation is one PodDeviceEntry.
type Allocation struct {
	PodUID    string `json:"pod_uid"`
	Container string `json:"container"`
	Resource  string `json:"resource"`
	// DeviceIDs are the IDs allocated, sorted, each once; NUMA says on
	// which NUMA nodes the plugin reported each (-1: no topology; absent in
	// FormatV1). The kubelet lists a device under every node of its
	// topology (podDevices.toCheckpointData in pod_devices.go).
	DeviceIDs []string           `json:"device_ids"`
	NUMA      map[string][]int64 `json:"numa,omitempty"`
	// Response summarizes the AllocateResponse the kubelet kept, when it
	// decodes: what the container was given. Environment values are not
	// kept (they may be secrets): only their names.
	Response *AllocSummary `json:"response,omitempty"`
	// ResponseErr says why the AllocateResponse did not decode.
	ResponseErr string `json:"response_error,omitempty"`
}

// AllocSummary is the part of a ContainerAllocateResponse a diagnosis
// uses.
type AllocSummary struct {
	DeviceNodes []string `json:"device_nodes,omitempty"` // host paths of DeviceSpecs
	Mounts      []string `json:"mounts,omitempty"`       // host paths
	CDIDevices  []string `json:"cdi_devices,omitempty"`
	EnvNames    []string `json:"env_names,omitempty"`
}

// The on-disk layouts. Field names and types are the kubelet's: JSON
// decoding (case-insensitive keys, null, base64 bytes) must give exactly
// the values the kubelet's own json.Unmarshal gives, because the checksum
// is computed over them.
type (
	entryV2 struct {
		PodUID        string
		ContainerName string
		ResourceName  string
		DeviceIDs     map[int64][]string
		AllocResp     []byte
	}
	dataV2 struct {
		PodDeviceEntries  []entryV2
		RegisteredDevices map[string][]string
	}
	fileV2 struct {
		Data     dataV2
		Checksum uint64
		BootID   string `json:",omitempty"`
	}
	entryV1 struct {
		PodUID        string
		ContainerName string
		ResourceName  string
		DeviceIDs     []string
		AllocResp     []byte
	}
	dataV1 struct {
		PodDeviceEntries  []entryV1
		RegisteredDevices map[string][]string
	}
	fileV1 struct {
		Data     dataV1
		Checksum uint64
	}
)

// ErrCheckpointSyntax marks a checkpoint that is not a device-manager
// checkpoint of any known layout.
var ErrCheckpointSyntax = errors.New("not a device-manager checkpoint")

// ParseCheckpoint parses the bytes of a kubelet_internal_checkpoint. It is
// a parser of untrusted bytes: anything but a checkpoint of a known
// layout is an error wrapping ErrCheckpointSyntax, never a panic. A
// checksum that does not match is not an error: it is reported in
// ChecksumOK, with both values.
func ParseCheckpoint(b []byte) (*Checkpoint, error) {
	if len(b) > MaxCheckpointSize {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrCheckpointSyntax, len(b), MaxCheckpointSize)
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrCheckpointSyntax)
	}
	if t[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrCheckpointSyntax)
	}
	// The kubelet decodes into a checkpoint whose PodDeviceEntries and
	// RegisteredDevices are already empty, not nil (getCheckpoint in
	// manager.go: checkpoint.New(make(...), make(...))): a file without
	// those keys keeps them empty, and that is what its checksum covers.
	v2 := fileV2{Data: dataV2{PodDeviceEntries: []entryV2{}, RegisteredDevices: map[string][]string{}}}
	err2 := json.Unmarshal(b, &v2)
	if err2 == nil {
		if err := checkShape(b); err != nil {
			return nil, err
		}
		cp := &Checkpoint{Format: FormatV2, Stored: v2.Checksum, Computed: checksumV2(&v2.Data), BootID: v2.BootID,
			Registered: v2.Data.RegisteredDevices}
		if hasKey(b, "BootID") {
			cp.Format = FormatV2BootID
		}
		for _, e := range v2.Data.PodDeviceEntries {
			a := Allocation{PodUID: e.PodUID, Container: e.ContainerName, Resource: e.ResourceName}
			for numa, ids := range e.DeviceIDs {
				for _, id := range ids {
					a.DeviceIDs = append(a.DeviceIDs, id)
					if a.NUMA == nil {
						a.NUMA = map[string][]int64{}
					}
					a.NUMA[id] = append(a.NUMA[id], numa)
				}
			}
			a.summarize(e.AllocResp)
			cp.Entries = append(cp.Entries, a)
		}
		cp.finish()
		return cp, nil
	}
	// The kubelets from 1.20 to the last that carried checkpointv1.go
	// fall back to V1 when V2 does not decode; so does this.
	v1 := fileV1{Data: dataV1{PodDeviceEntries: []entryV1{}, RegisteredDevices: map[string][]string{}}}
	if err1 := json.Unmarshal(b, &v1); err1 == nil {
		if err := checkShape(b); err != nil {
			return nil, err
		}
		cp := &Checkpoint{Format: FormatV1, Stored: v1.Checksum, Computed: checksumV1(&v1.Data), Registered: v1.Data.RegisteredDevices}
		for _, e := range v1.Data.PodDeviceEntries {
			a := Allocation{PodUID: e.PodUID, Container: e.ContainerName, Resource: e.ResourceName,
				DeviceIDs: append([]string(nil), e.DeviceIDs...)}
			a.summarize(e.AllocResp)
			cp.Entries = append(cp.Entries, a)
		}
		cp.finish()
		return cp, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrCheckpointSyntax, err2)
}

// checkShape requires the keys that make a JSON object a checkpoint:
// json.Unmarshal accepts "{}" or any object, and an object without Data
// and Checksum is some other file.
func checkShape(b []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return fmt.Errorf("%w: %v", ErrCheckpointSyntax, err)
	}
	var data, sum bool
	for k := range top {
		data = data || strings.EqualFold(k, "Data")
		sum = sum || strings.EqualFold(k, "Checksum")
	}
	if !data || !sum {
		return fmt.Errorf("%w: no Data and Checksum keys", ErrCheckpointSyntax)
	}
	return nil
}

func hasKey(b []byte, key string) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return false
	}
	for k := range top {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

func (cp *Checkpoint) finish() {
	cp.ChecksumOK = cp.Stored == cp.Computed
	for i := range cp.Entries {
		e := &cp.Entries[i]
		sort.Strings(e.DeviceIDs)
		e.DeviceIDs = compact(e.DeviceIDs)
		for _, n := range e.NUMA {
			sort.Slice(n, func(i, j int) bool { return n[i] < n[j] })
		}
	}
	if len(cp.Registered) == 0 {
		cp.Registered = nil
	}
	for r, ids := range cp.Registered {
		ids = append([]string(nil), ids...)
		sort.Strings(ids)
		cp.Registered[r] = ids
	}
}

// summarize decodes the kubelet's copy of the plugin's
// ContainerAllocateResponse (pod_devices.go keeps it proto-marshalled).
func (a *Allocation) summarize(resp []byte) {
	if len(resp) == 0 {
		return
	}
	s, err := decodeAllocateResponse(resp)
	if err != nil {
		a.ResponseErr = err.Error()
		return
	}
	sort.Strings(s.EnvNames)
	a.Response = s
}

// AllocatedIDs is every device ID the checkpoint allocates, per resource.
func (cp *Checkpoint) AllocatedIDs() map[string][]string {
	out := map[string][]string{}
	for _, e := range cp.Entries {
		out[e.Resource] = append(out[e.Resource], e.DeviceIDs...)
	}
	for r, ids := range out {
		sort.Strings(ids)
		out[r] = compact(ids)
	}
	return out
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
