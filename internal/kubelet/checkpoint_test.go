package kubelet

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

var update = flag.Bool("update", false, "rewrite testdata/checkpoints")

func errUnimplemented(m string) error {
	return status.Errorf(codes.Unimplemented, "unknown method %s", m)
}

// allocResp is what the kubelet keeps of an Allocate answer: the
// ContainerAllocateResponse, proto-marshalled (pod_devices.go).
func allocResp() []byte {
	// Deterministic: Envs is a map, and the fixtures are compared byte for byte.
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pluginapi.ContainerAllocateResponse{
		Envs:       map[string]string{"NVIDIA_VISIBLE_DEVICES": gpu0 + "," + gpu1, "LICENSE_TOKEN": "s3cr3t"},
		Devices:    []*pluginapi.DeviceSpec{{HostPath: "/dev/nvidia0", ContainerPath: "/dev/nvidia0", Permissions: "rw"}},
		Mounts:     []*pluginapi.Mount{{HostPath: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", ContainerPath: "/usr/lib/libcuda.so.1", ReadOnly: true}},
		CdiDevices: []*pluginapi.CDIDevice{{Name: "nvidia.com/gpu=0"}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// The checksum printer agrees with the kubelet's algorithm run with
// go-spew on every shape the JSON can decode to: nil and empty slices and
// maps, nil and empty byte slices, negative NUMA keys, several resources,
// strings with spaces, colons, brackets and non-ASCII bytes.
func TestChecksumMatchesKubelet(t *testing.T) {
	cases := map[string]checkpointData{
		"sample":           sampleData(),
		"nil everything":   {},
		"empty everything": {PodDeviceEntries: []PodDevicesEntry{}, RegisteredDevices: map[string][]string{}},
		"nil map values":   {RegisteredDevices: map[string][]string{"a/b": nil, "a/a": {}}},
		"odd strings": {PodDeviceEntries: []PodDevicesEntry{{PodUID: "u i d", ContainerName: "c:{}[]", ResourceName: "r/é",
			DeviceIDs: DevicesPerNUMA{5: {"x y", ""}, -1: nil, -7: {}}, AllocResp: []byte{}}}},
		"entry zero": {PodDeviceEntries: []PodDevicesEntry{{}}},
		"many": {PodDeviceEntries: []PodDevicesEntry{{PodUID: "p1", DeviceIDs: DevicesPerNUMA{1: {"b"}, 0: {"a"}}},
			{PodUID: "p2", AllocResp: []byte{0, 255, 10}}},
			RegisteredDevices: map[string][]string{"z/z": {"1"}, "a/a": {"2", "1"}, "m/m": {}}},
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			b := kubeletCheckpoint(t, d, "")
			cp, err := ParseCheckpoint(b)
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, b)
			}
			if !cp.ChecksumOK || cp.Computed != cp.Stored {
				t.Errorf("checksum: stored %d, computed %d: the printer differs from spew's %%#v:\n%s", cp.Stored, cp.Computed,
					renamePkg(forHash.Sprintf("%#v", d)))
			}
			if cp.Format != FormatV2 {
				t.Errorf("format %s", cp.Format)
			}
		})
	}
	v1 := checkpointDataV1{PodDeviceEntries: []PodDevicesEntryV1{{PodUID: "p", ContainerName: "c", ResourceName: "nvidia.com/gpu",
		DeviceIDs: []string{gpu0, "PodDevicesEntryV1 in an ID"}, AllocResp: allocResp()}},
		RegisteredDevices: map[string][]string{"nvidia.com/gpu": {gpu0}}}
	cp, err := ParseCheckpoint(kubeletCheckpointV1(t, v1))
	if err != nil {
		t.Fatal(err)
	}
	if cp.Format != FormatV1 || !cp.ChecksumOK {
		t.Errorf("v1: format %s, stored %d, computed %d", cp.Format, cp.Stored, cp.Computed)
	}
}

func TestParseCheckpoint(t *testing.T) {
	cp, err := ParseCheckpoint(kubeletCheckpoint(t, sampleData(), "b00710d0-0000-4000-8000-00000000b007"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Checkpoint{Format: FormatV2BootID, Stored: cp.Stored, Computed: cp.Stored, ChecksumOK: true,
		BootID: "b00710d0-0000-4000-8000-00000000b007",
		Entries: []Allocation{{PodUID: "0d1c2b3a-0000-4000-8000-000000000001", Container: "cuda", Resource: "nvidia.com/gpu",
			DeviceIDs: []string{gpu0, gpu1}, NUMA: map[string][]int64{gpu0: {0}, gpu1: {1}},
			Response: &AllocSummary{DeviceNodes: []string{"/dev/nvidia0"}, Mounts: []string{"/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
				CDIDevices: []string{"nvidia.com/gpu=0"}, EnvNames: []string{"LICENSE_TOKEN", "NVIDIA_VISIBLE_DEVICES"}}},
			{PodUID: "0d1c2b3a-0000-4000-8000-000000000002", Container: "side", Resource: "example.com/fpga",
				DeviceIDs: []string{"fpga-7"}, NUMA: map[string][]int64{"fpga-7": {-1}}}},
		Registered: map[string][]string{"nvidia.com/gpu": {gpu0, gpu1, gpu2}, "example.com/fpga": {"fpga-7"}},
	}
	if d := cmp.Diff(want, cp); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got := cp.AllocatedIDs()["nvidia.com/gpu"]; !cmp.Equal(got, []string{gpu0, gpu1}) {
		t.Errorf("AllocatedIDs = %v", got)
	}
	// No environment value survives parsing.
	if b, _ := (&Node{Checkpoint: cp}).marshalCapture(), 0; bytes.Contains(b, []byte("s3cr3t")) {
		t.Errorf("a capture holds an environment value: %s", b)
	}
}

func TestParseCheckpointBad(t *testing.T) {
	good := kubeletCheckpoint(t, sampleData(), "")
	bad := bytes.Replace(good, []byte(`"Checksum":`), []byte(`"Checksum":1`), 1)
	cp, err := ParseCheckpoint(bad)
	if err != nil {
		t.Fatal(err)
	}
	if cp.ChecksumOK || cp.Stored == cp.Computed {
		t.Errorf("a changed checksum verifies: stored %d computed %d", cp.Stored, cp.Computed)
	}
	// One device ID changed, checksum kept: the kubelet would refuse it.
	tampered := bytes.Replace(good, []byte(gpu1), []byte(gpu2), 1)
	if cp, err := ParseCheckpoint(tampered); err != nil || cp.ChecksumOK {
		t.Errorf("a tampered checkpoint: %+v, %v", cp, err)
	}

	for name, b := range map[string][]byte{
		"empty":        {},
		"spaces":       []byte("  \n"),
		"null":         []byte("null"),
		"array":        []byte("[]"),
		"empty object": []byte("{}"),
		"other object": []byte(`{"policyName":"none","defaultCpuSet":"","checksum":1}`),
		"truncated":    good[:len(good)/2],
		"garbage":      []byte("\x00\x01\x02garbage"),
		"bad types":    []byte(`{"Data":{"PodDeviceEntries":[{"DeviceIDs":{"x":["a"]}}]},"Checksum":1}`),
		"negative sum": []byte(`{"Data":{},"Checksum":-1}`),
		"huge":         append([]byte(`{"Data":{},"Checksum":1,"x":"`), bytes.Repeat([]byte("a"), MaxCheckpointSize)...),
	} {
		if cp, err := ParseCheckpoint(b); !errors.Is(err, ErrCheckpointSyntax) {
			t.Errorf("%s: %+v, %v; want ErrCheckpointSyntax", name, cp, err)
		}
	}
}

// The fixtures are checkpoints constructed with the kubelet's algorithm
// (the oracle above: go-spew and FNV-1a, as the kubelet runs them), not
// written by a kubelet: the e2e module's real device manager is to give
// one (see doc.go). Regenerate with -update.
func TestFixtures(t *testing.T) {
	dir := filepath.Join("testdata", "checkpoints")
	v1 := checkpointDataV1{PodDeviceEntries: []PodDevicesEntryV1{{PodUID: "p-v1", ContainerName: "c", ResourceName: "nvidia.com/gpu",
		DeviceIDs: []string{gpu0}}}, RegisteredDevices: map[string][]string{"nvidia.com/gpu": {gpu0}}}
	fixtures := map[string][]byte{
		"v2.json":        kubeletCheckpoint(t, sampleData(), ""),
		"v2-bootid.json": kubeletCheckpoint(t, sampleData(), "b00710d0-0000-4000-8000-00000000b007"),
		"v1.json":        kubeletCheckpointV1(t, v1),
		// The kubelet's own write after a restart with no pods: nil
		// entries, a resource known from before with no device yet.
		"restart.json": kubeletCheckpoint(t, checkpointData{RegisteredDevices: map[string][]string{"nvidia.com/gpu": {}}}, ""),
	}
	fixtures["bad-checksum.json"] = bytes.Replace(fixtures["v2.json"], []byte(`"Checksum":`), []byte(`"Checksum":9`), 1)
	if *update {
		os.MkdirAll(dir, 0o755)
		for name, b := range fixtures {
			if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, want := range fixtures {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%v (run with -update)", err)
		}
		if !bytes.Equal(bytes.TrimSpace(b), want) {
			t.Errorf("%s differs from what the oracle writes now (run with -update)", name)
		}
		cp, err := ParseCheckpoint(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ok := name != "bad-checksum.json"; cp.ChecksumOK != ok {
			t.Errorf("%s: ChecksumOK %v", name, cp.ChecksumOK)
		}
	}
}

func FuzzParseCheckpoint(f *testing.F) {
	for _, n := range []string{"v2.json", "v2-bootid.json", "v1.json", "restart.json", "bad-checksum.json", "kubelet-v1.37.2.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "checkpoints", n)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"Data":{"PodDeviceEntries":null,"RegisteredDevices":null},"Checksum":0}`))
	f.Add([]byte(`{"data":{"poddeviceentries":[{"DeviceIDs":{"-1":["a"]},"AllocResp":""}]},"checksum":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := ParseCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCheckpointSyntax) {
				t.Fatalf("error not marked: %v", err)
			}
			return
		}
		if cp.Format == FormatV1 || bytes.Contains(b, []byte("kubelet.")) {
			return
		}
		// The printer agrees with spew on whatever decodes.
		d := checkpointData{PodDeviceEntries: []PodDevicesEntry{}, RegisteredDevices: map[string][]string{}}
		var file struct{ Data *checkpointData }
		file.Data = &d
		if err := json.Unmarshal(b, &file); err != nil {
			t.Fatalf("the oracle's types do not decode what ours did: %v", err)
		}
		if o := oracleV2(d); o != cp.Computed {
			t.Fatalf("computed %d, the kubelet's algorithm %d\n%s", cp.Computed, o, renamePkg(forHash.Sprintf("%#v", d)))
		}
	})
}

// testdata/checkpoints/kubelet-v1.37.2.json was written by the kubelet's
// own code: a program outside this module that requires
// k8s.io/kubernetes v1.37.2 (its staging modules replaced by v0.37.2)
// called checkpoint.New(entries, registered).MarshalCheckpoint() from
// pkg/kubelet/cm/devicemanager/checkpoint, and the same package's
// VerifyChecksum accepted the bytes. The entries: two GPUs on NUMA 0 and
// 1 for one container (AllocResp the bytes 10 3 1 2 3), one FPGA without
// topology (-1, AllocResp nil); RegisteredDevices with an empty list.
func TestRealKubeletCheckpoint(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "checkpoints", "kubelet-v1.37.2.json"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := ParseCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Format != FormatV2 || cp.Stored != 3675699085 || !cp.ChecksumOK {
		t.Errorf("format %s, stored %d, computed %d", cp.Format, cp.Stored, cp.Computed)
	}
	if len(cp.Entries) != 2 || !cmp.Equal(cp.Entries[0].NUMA, map[string][]int64{gpu0: {0}, gpu1: {1}}) ||
		!cmp.Equal(cp.Entries[1].NUMA, map[string][]int64{"fpga-7": {-1}}) {
		t.Errorf("entries %+v", cp.Entries)
	}
	// One byte of a device ID changed: the kubelet's checksum no longer
	// matches, and ours says so.
	if cp, err := ParseCheckpoint(bytes.Replace(b, []byte("fpga-7"), []byte("fpga-8"), 1)); err != nil || cp.ChecksumOK {
		t.Errorf("tampered: %+v, %v", cp, err)
	}
}
