package kubelet

import (
	"encoding/json"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/davecgh/go-spew/spew"
)

// The oracle: the kubelet's own algorithm run with the library the
// kubelet runs it with (go-spew, the version k8s.io/kubelet requires),
// over types shaped and named as the kubelet's
// (pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go and
// checkpointv1.go). Only the package name differs ("kubelet" here,
// "checkpoint" there) and is renamed in the printed type tokens.

type DevicesPerNUMA map[int64][]string

type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

type PodDevicesEntryV1 struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     []string
	AllocResp     []byte
}

type checkpointDataV1 struct {
	PodDeviceEntries  []PodDevicesEntryV1
	RegisteredDevices map[string][]string
}

// forHash is k8s.io/utils/dump's prettyPrintConfigForHash.
var forHash = spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true,
	DisablePointerAddresses: true, DisableCapacities: true}

// v1Printer is checkpointv1.go's printer.
var v1Printer = spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}

func renamePkg(s string) string {
	for _, t := range []string{"(kubelet.checkpointData)", "[]kubelet.PodDevicesEntry", "(kubelet.DevicesPerNUMA)"} {
		s = strings.ReplaceAll(s, t, strings.Replace(t, "kubelet.", "checkpoint.", 1))
	}
	return s
}

// oracleV2 is checksum.New(cp.Data): FNV-1a 32 of dump.ForHash(data).
func oracleV2(d checkpointData) uint64 {
	h := fnv.New32a()
	h.Write([]byte(renamePkg(forHash.Sprintf("%#v", d))))
	return uint64(h.Sum32())
}

// oracleV1 is checkpointDataV1.checksum().
func oracleV1(d checkpointDataV1) uint64 {
	object := v1Printer.Sprintf("%#v", d)
	object = strings.Replace(object, "checkpointDataV1", "checkpointData", 1)
	object = strings.Replace(object, "PodDevicesEntryV1", "PodDevicesEntry", -1)
	object = renamePkg(object)
	h := fnv.New32a()
	v1Printer.Fprintf(h, "%v", object)
	return uint64(h.Sum32())
}

// kubeletCheckpoint writes a checkpoint as the kubelet's MarshalCheckpoint
// does: the checksum of Data, then json.Marshal of {Data, Checksum[,
// BootID]}.
func kubeletCheckpoint(t testing.TB, d checkpointData, bootID string) []byte {
	t.Helper()
	type file struct {
		Data     checkpointData
		Checksum uint64
		BootID   string `json:",omitempty"`
	}
	b, err := json.Marshal(file{Data: d, Checksum: oracleV2(d), BootID: bootID})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kubeletCheckpointV1(t testing.TB, d checkpointDataV1) []byte {
	t.Helper()
	type file struct {
		Data     checkpointDataV1
		Checksum uint64
	}
	b, err := json.Marshal(file{Data: d, Checksum: oracleV1(d)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleData is a node with two GPUs allocated to one container and one
// registered but free.
func sampleData() checkpointData {
	return checkpointData{
		PodDeviceEntries: []PodDevicesEntry{{
			PodUID: "0d1c2b3a-0000-4000-8000-000000000001", ContainerName: "cuda", ResourceName: "nvidia.com/gpu",
			DeviceIDs: DevicesPerNUMA{0: {gpu0}, 1: {gpu1}},
			AllocResp: allocResp(),
		}, {
			PodUID: "0d1c2b3a-0000-4000-8000-000000000002", ContainerName: "side", ResourceName: "example.com/fpga",
			DeviceIDs: DevicesPerNUMA{-1: {"fpga-7"}},
		}},
		RegisteredDevices: map[string][]string{"nvidia.com/gpu": {gpu0, gpu1, gpu2}, "example.com/fpga": {"fpga-7"}},
	}
}

const (
	gpu0 = "GPU-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0a00"
	gpu1 = "GPU-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0a01"
	gpu2 = "GPU-6d1f6a3e-5d0b-4e53-9a9c-3c1f0e0c0a02"
)
