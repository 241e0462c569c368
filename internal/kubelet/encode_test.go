package kubelet

import (
	"slices"
	"testing"
)

// What EncodeCheckpoint writes parses back with a checksum that verifies
// (checksumV2 itself is held to the kubelet's algorithm and to a file the
// kubelet wrote: checksum_test.go, TestRealKubeletCheckpoint).
func TestEncodeCheckpoint(t *testing.T) {
	want := &Checkpoint{
		BootID:     "8a1f3c1e-1111-4222-8333-944455556666",
		Entries:    []Allocation{{PodUID: "p1", Container: "c", Resource: "nvidia.com/gpu", DeviceIDs: []string{"GPU-a", "GPU-b"}, NUMA: map[string][]int64{"GPU-a": {0}}}},
		Registered: map[string][]string{"nvidia.com/gpu": {"GPU-a", "GPU-b"}},
	}
	b, err := EncodeCheckpoint(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ChecksumOK || got.Format != FormatV2BootID || got.BootID != want.BootID || len(got.Entries) != 1 ||
		!slices.Equal(got.Entries[0].DeviceIDs, []string{"GPU-a", "GPU-b"}) || !slices.Equal(got.Registered["nvidia.com/gpu"], []string{"GPU-a", "GPU-b"}) {
		t.Fatalf("round trip: %+v", got)
	}
}

// A Response given to EncodeCheckpoint reads back as the kubelet's
// decoder of the AllocateResponse reads it.
func TestEncodeCheckpointKeepsTheResponse(t *testing.T) {
	cp := &Checkpoint{Entries: []Allocation{{PodUID: "p", Container: "c", Resource: "nvidia.com/gpu", DeviceIDs: []string{"GPU-0"},
		Response: &AllocSummary{CDIDevices: []string{"nvidia.com/gpu=0"}, DeviceNodes: []string{"/dev/nvidia0"}, Mounts: []string{"/tmp/Dev-1"}}}}}
	b, err := EncodeCheckpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	r := got.Entries[0].Response
	if !got.ChecksumOK || r == nil || len(r.CDIDevices) != 1 || r.CDIDevices[0] != "nvidia.com/gpu=0" || len(r.DeviceNodes) != 1 || r.DeviceNodes[0] != "/dev/nvidia0" ||
		!slices.Equal(r.Mounts, []string{"/tmp/Dev-1"}) {
		t.Fatalf("read back %+v (checksum ok %v)", r, got.ChecksumOK)
	}
}
