package dra

import (
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/state/kubelet-v1.37.2*.json were written by the kubelet's own
// checkpointer (see doc.go): they parse, their checksums verify, and the
// claim reads back as the generator wrote it.
func TestRealKubeletState(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "state", "kubelet-v1.37.2.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseState(b)
	if err != nil {
		t.Fatal(err)
	}
	const uid = "a1b2c3d4-1111-4222-8333-444455556666"
	want := &State{Kind: StateKind, APIVersion: StateAPIVersion, Stored: 321673172, Computed: 321673172, ChecksumOK: true,
		Claims: []Claim{{UID: uid, Name: "pod-gpu-claim", Namespace: "ml", PodUIDs: []string{"0f0e0d0c-aaaa-4bbb-8ccc-dddddddddddd"},
			Drivers: []DriverClaim{{Driver: "gpu.example.com", Devices: []ClaimDevice{
				{Pool: "node-a", Device: "gpu-0", Requests: []string{"gpu"}, CDIDeviceIDs: []string{"k8s.gpu.example.com/claim=" + uid + "-gpu-0"}},
				{Pool: "node-a", Device: "gpu-1", ShareID: "4d3c2b1a-0000-4000-8000-00000000cafe", Requests: []string{"gpu", "gpu/sub"},
					CDIDeviceIDs: []string{"k8s.gpu.example.com/claim=" + uid + "-gpu-1", "example.com/gpu=common"}},
			}}}}}}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got := s.CDIDeviceIDs(); len(got) != 3 {
		t.Errorf("CDI IDs %v", got)
	}
	b, err = os.ReadFile(filepath.Join("testdata", "state", "kubelet-v1.37.2-empty.json"))
	if err != nil {
		t.Fatal(err)
	}
	if s, err = ParseState(b); err != nil || !s.ChecksumOK || len(s.Claims) != 0 || s.Kind != StateKind {
		t.Errorf("empty state: %+v %v", s, err)
	}
}

// What our test writer produces verifies as the kubelet's file does.
func TestStateJSONVerifies(t *testing.T) {
	s, err := ParseState(stateJSON(t, sampleClaims()))
	if err != nil || !s.ChecksumOK || len(s.Claims) != 1 {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestParseStateBad(t *testing.T) {
	good := stateJSON(t, sampleClaims())
	var f stateFile
	json.Unmarshal(good, &f)
	wrongSum, _ := json.Marshal(stateFile{Data: f.Data, Checksum: f.Checksum + 1})
	badData := `{"not":1}`
	badDataFile, _ := json.Marshal(stateFile{Data: "{", Checksum: crc32.ChecksumIEEE([]byte("{"))})
	for _, c := range []struct {
		name, in string
		err      bool
		check    func(*State) bool
	}{
		{"empty", "", true, nil},
		{"not json", "GARBAGE", true, nil},
		{"array", "[]", true, nil},
		{"checksum too large", `{"Data":"","Checksum":4294967296}`, true, nil},
		{"wrong checksum", string(wrongSum), false, func(s *State) bool { return !s.ChecksumOK && len(s.Claims) == 1 }},
		// No Data: CRC-32 of "" is 0, as stored: it verifies, and the
		// empty Data does not decode (the kubelet fails there too).
		{"data not the kubelet's", badData, false, func(s *State) bool { return s.ChecksumOK && s.DataErr != "" }},
		{"data not json", string(badDataFile), false, func(s *State) bool { return s.ChecksumOK && s.DataErr != "" && len(s.Claims) == 0 }},
		{"keys in another case", `{"data":"{\"ClaimInfoStateList\":null}","checksum":` + itoa(crc32.ChecksumIEEE([]byte(`{"ClaimInfoStateList":null}`))) + `}`, false,
			func(s *State) bool { return s.ChecksumOK }},
	} {
		s, err := ParseState([]byte(c.in))
		if (err != nil) != c.err {
			t.Errorf("%s: err %v", c.name, err)
			continue
		}
		if c.check != nil && !c.check(s) {
			t.Errorf("%s: %+v", c.name, s)
		}
	}
}

func itoa(v uint32) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzParseState: any bytes give a State or an error, never a panic; a
// State's checksum verdict is the CRC of what Data decoded to.
func FuzzParseState(f *testing.F) {
	for _, n := range []string{"kubelet-v1.37.2.json", "kubelet-v1.37.2-empty.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "state", n)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"Data":"","Checksum":0}`))
	f.Add([]byte(`{"Data":"{\"ClaimInfoStateList\":[{\"DriverState\":{\"d\":{\"Devices\":[{\"ShareID\":\"x\"}]}}}]}","Checksum":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseState(b)
		if err != nil {
			return
		}
		var sf stateFile
		if json.Unmarshal(b, &sf) != nil {
			t.Fatalf("parsed what does not decode")
		}
		if s.Computed != crc32.ChecksumIEEE([]byte(sf.Data)) || s.ChecksumOK != (s.Stored == s.Computed) {
			t.Fatalf("checksum %+v", s)
		}
		_ = s.CDIDeviceIDs()
	})
}
