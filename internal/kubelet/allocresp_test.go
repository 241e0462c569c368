package kubelet

import (
	"slices"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// oracle is what the generated type's decoding keeps.
func oracle(b []byte) (*AllocSummary, error) {
	var r pluginapi.ContainerAllocateResponse
	if err := proto.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	s := &AllocSummary{}
	for _, d := range r.Devices {
		s.DeviceNodes = append(s.DeviceNodes, d.GetHostPath())
	}
	for _, m := range r.Mounts {
		s.Mounts = append(s.Mounts, m.GetHostPath())
	}
	for _, c := range r.CdiDevices {
		s.CDIDevices = append(s.CDIDevices, c.GetName())
	}
	for k := range r.Envs {
		s.EnvNames = append(s.EnvNames, k)
	}
	sort.Strings(s.EnvNames)
	return s, nil
}

func sameSummary(a, b *AllocSummary) bool {
	ea, eb := slices.Clone(a.EnvNames), slices.Clone(b.EnvNames)
	slices.Sort(ea)
	slices.Sort(eb)
	return slices.Equal(a.DeviceNodes, b.DeviceNodes) && slices.Equal(a.Mounts, b.Mounts) &&
		slices.Equal(a.CDIDevices, b.CDIDevices) && slices.Equal(ea, eb)
}

func allocSamples(t testing.TB) [][]byte {
	var out [][]byte
	for _, r := range []*pluginapi.ContainerAllocateResponse{
		{},
		{Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1", "A": ""},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/usr/lib/x", HostPath: "/opt/x", ReadOnly: true}, {}},
			Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/nvidia0", HostPath: "/dev/nvidia0", Permissions: "rw"}},
			Annotations: map[string]string{"k": "v"},
			CdiDevices:  []*pluginapi.CDIDevice{{Name: "nvidia.com/gpu=0"}, {Name: ""}}},
		{Devices: []*pluginapi.DeviceSpec{{HostPath: "/dev/accel/accel0"}, {HostPath: "/dev/accel/accel1"}}},
	} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// decodeAllocateResponse keeps what the generated type's decoding keeps,
// on real responses and on every truncation of them.
func TestDecodeAllocateResponseMatchesTheGeneratedType(t *testing.T) {
	for _, b := range allocSamples(t) {
		for n := 0; n <= len(b); n++ {
			checkAgainstOracle(t, b[:n])
		}
	}
	// A key set twice and a field of another wire type.
	checkAgainstOracle(t, []byte{0x0a, 0x03, 0x0a, 0x01, 'K', 0x0a, 0x03, 0x0a, 0x01, 'K', 0x10, 0x01})
	// Not UTF-8.
	checkAgainstOracle(t, []byte{0x2a, 0x03, 0x0a, 0x01, 0xff})
}

func checkAgainstOracle(t testing.TB, b []byte) {
	t.Helper()
	want, werr := oracle(b)
	got, gerr := decodeAllocateResponse(b)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%x: error %v, the generated type's %v", b, gerr, werr)
	}
	if werr == nil && !sameSummary(got, want) {
		t.Fatalf("%x: %+v, the generated type gives %+v", b, got, want)
	}
}

func FuzzDecodeAllocateResponse(f *testing.F) {
	for _, b := range allocSamples(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkAgainstOracle(t, b) })
}
