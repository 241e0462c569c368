package runtime

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// A runc 1.1 state.json as runc writes it (trimmed config; the keys are
// runc's).
const runcStateSample = `{"id":"abc","init_process_pid":23084,"init_process_start":497692,
"created":"2026-12-01T10:47:06.845109146Z",
"config":{"rootfs":"/b/rootfs","labels":["io.kubernetes.cri.sandbox-name=x","bundle=/b"],
  "Hooks":{"prestart":[{"path":"/hook","args":["/hook","--token=S3cret"]}]},"seccomp":{"syscalls":[{"names":["read"]}]}},
"rootless":false,"cgroup_paths":{"":"/sys/fs/cgroup/unified/abc","devices":"/sys/fs/cgroup/devices/abc"},
"namespace_paths":{"NEWPID":"/proc/23084/ns/pid"},"external_descriptors":["/dev/null"],"intel_rdt_path":""}`

func TestParseRuncState(t *testing.T) {
	got, err := parseRuncState([]byte(runcStateSample))
	want := ociState{Format: Runc, ID: "abc", PID: 23084, StartTime: 497692,
		Created: time.Date(2026, 12, 1, 10, 47, 6, 845109146, time.UTC), Bundle: "/b",
		Labels:      map[string]string{"io.kubernetes.cri.sandbox-name": "x"},
		CgroupPaths: map[string]string{"": "/sys/fs/cgroup/unified/abc", "devices": "/sys/fs/cgroup/devices/abc"}}
	testutil.CheckParse(t, got, err, want, false)

	for name, in := range map[string]string{
		"old string start time": `{"id":"a","init_process_pid":5,"init_process_start":"77"}`,
		"null start time":       `{"id":"a","init_process_pid":5,"init_process_start":null}`,
	} {
		st, err := parseRuncState([]byte(in))
		if err != nil || st.PID != 5 || (name == "old string start time" && st.StartTime != 77) {
			t.Errorf("%s: %+v, %v", name, st, err)
		}
	}
	for name, in := range map[string]string{
		"garbage":          `{not json`,
		"negative pid":     `{"init_process_pid":-1}`,
		"pid over max":     `{"init_process_pid":99999999}`,
		"start not number": `{"init_process_start":"soon"}`,
		"start negative":   `{"init_process_start":-5}`,
		"bad created":      `{"created":"yesterday"}`,
		"labels not list":  `{"config":{"labels":"bundle=/x"}}`,
		"top not object":   `[1,2]`,
	} {
		if _, err := parseRuncState([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// What a snapshot keeps of runc's state is what the lookup reads: the
// hooks' arguments (and the rest of the config) stay on the host, and the
// kept form parses to the same state.
func TestRedactRuncState(t *testing.T) {
	out := redactRuncState([]byte(runcStateSample))
	if out == nil || strings.Contains(string(out), "S3cret") || strings.Contains(string(out), "seccomp") {
		t.Fatalf("redacted state: %s", out)
	}
	a, _ := parseRuncState([]byte(runcStateSample))
	b, err := parseRuncState(out)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, b); d != "" {
		t.Errorf("the kept state parses differently (-host +kept):\n%s", d)
	}
	if redactRuncState([]byte("{garbage")) != nil {
		t.Error("an unparsable state would travel")
	}
}

// crun's status file as src/libcrun/status.c writes it.
const crunStatusSample = `{
    "pid": 139179,
    "process-start-time": 263473330,
    "cgroup-path": "/busybox1",
    "scope": "",
    "rootfs": "rootfs",
    "systemd-cgroup": false,
    "bundle": "/home/x/my_container",
    "created": "2021-08-29T14:34:52.000293421Z",
    "owner": "root",
    "detached": true,
    "external_descriptors": "[\"/dev/pts/1\"]"
}`

func TestParseCrunStatus(t *testing.T) {
	got, err := parseCrunStatus([]byte(crunStatusSample))
	want := ociState{Format: Crun, PID: 139179, StartTime: 263473330, CgroupPath: "/busybox1", Bundle: "/home/x/my_container",
		Created: time.Date(2021, 8, 29, 14, 34, 52, 293421, time.UTC)}
	testutil.CheckParse(t, got, err, want, false)

	st, err := parseCrunStatus([]byte(`{"pid":7,"created":"not a time"}`))
	if err != nil || st.PID != 7 || len(st.Warnings) != 1 {
		t.Errorf("a bad creation time should be a warning beside the rest: %+v, %v", st, err)
	}
	for _, in := range []string{`{`, `{"pid":-3}`, `{"pid":"x"}`, `{"process-start-time":"x"}`} {
		if _, err := parseCrunStatus([]byte(in)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

// CRI-O's state.json: an OCI state with CRI-O's fields
// (internal/oci/container.go ContainerState); the start time a string
// since it became one, a number (not comparable) before.
func TestParseCRIOState(t *testing.T) {
	in := `{"ociVersion":"1.0.2","id":"c1","status":"running","pid":42,"bundle":"/run/containers/storage/overlay-containers/c1/userdata",
"annotations":{"io.kubernetes.pod.name":"p"},"created":"2024-01-02T03:04:05Z","started":"2024-01-02T03:04:06Z","finished":"0001-01-01T00:00:00Z",
"initPid":42,"initStartTime":"123456","checkpointedTime":"0001-01-01T00:00:00Z"}`
	st, err := parseCRIOState([]byte(in))
	if err != nil || st.ID != "c1" || st.Pid != 42 || st.InitPID != 42 || st.InitStartTime != 123456 ||
		st.Status != "running" || st.Annotations["io.kubernetes.pod.name"] != "p" || st.Created.Year() != 2024 {
		t.Errorf("%+v, %v", st, err)
	}
	old, err := parseCRIOState([]byte(`{"id":"c1","pid":42,"initPid":42,"initStartTime":1529496521}`))
	if err != nil || old.InitStartTime != 0 || old.InitPID != 42 {
		t.Errorf("the older numeric start time: %+v, %v", old, err)
	}
	for _, bad := range []string{`{"pid":-1}`, `{"initPid":9999999999}`, `{"initStartTime":"later"}`, `{"initStartTime":"`, `nope`} {
		if _, err := parseCRIOState([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if b := redactCRIOState([]byte(in)); b == nil || !json.Valid(b) {
		t.Errorf("redacted CRI-O state: %s", b)
	}
}

// The OCI state a real CRI-O hook received (the corpus) parses, and names
// its pod.
func TestCorpusOCIState(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.CorpusDir(t), "intel-device-plugins", "oci-state-stdin.json"))
	if err != nil {
		t.Skipf("corpus state: %v", err)
	}
	st, err := parseCRIOState(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != "1c40dd8efd268a47d7fb9f75d00f50c20af49d07d8d3c5fb948e68abb6d5ecf9" || st.Pid != 39638 || st.Bundle != "testdata" {
		t.Errorf("state %+v", st.State)
	}
	p, ok := PodOf(st.Annotations)
	if !ok || p != (Pod{Namespace: "default", Name: "test-fpga-region", UID: "942e94c1-72d3-11e8-b221-c81f66f62fcc", Container: "test-container", From: "cri-o"}) {
		t.Errorf("pod %+v, %v", p, ok)
	}
}

// The real CRI-O config.json of the corpus parses with the runtime-spec
// types and names its pod, a workload container (not the sandbox).
func TestCorpusCRIOConfigPod(t *testing.T) {
	p := filepath.Join(testutil.CorpusDir(t), "intel-device-plugins", "oci-config-crio-fpga.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("corpus config: %v", err)
	}
	s, err := ParseSpec(b, p)
	if err != nil {
		t.Fatal(err)
	}
	pod, ok := PodOf(s.Annotations)
	want := Pod{Namespace: "default", Name: "test-fpga-region", UID: "a869ac70-7482-11e8-a041-c81f66f62fcc", Container: "test-container",
		SandboxID: "a30829b039e1c631432fe7ab5c748a393c105ed90ec42a6cc95bd7d33356b94e", From: "cri-o"}
	if !ok || pod != want {
		t.Errorf("pod %+v, want %+v", pod, want)
	}
	if s.Linux == nil || !strings.HasSuffix(s.Linux.CgroupsPath, "crio-a15ee43034ade4083279bdbb7cf656a971809cfb00eb97a7751bb46dd74c9150") {
		t.Errorf("cgroupsPath %v", s.Linux)
	}
}

func TestPodOf(t *testing.T) {
	for name, tc := range map[string]struct {
		ann  map[string]string
		want Pod
		ok   bool
	}{
		"containerd container": {map[string]string{annCRIType: "container", annCRINamespace: "ml", annCRIName: "train-0", annCRIUID: "u1",
			annCRIContainer: "cuda", annCRISandboxID: "sb1"}, Pod{"ml", "train-0", "u1", "cuda", false, "sb1", "containerd"}, true},
		"containerd sandbox": {map[string]string{annCRIType: "sandbox", annCRINamespace: "ml", annCRIName: "train-0", annCRISandboxID: "sb1"},
			Pod{Namespace: "ml", Name: "train-0", Sandbox: true, SandboxID: "sb1", From: "containerd"}, true},
		"cri-o infra by name": {map[string]string{annKubeNamespace: "ml", annKubeName: "p", annKubeContainer: "POD"},
			Pod{Namespace: "ml", Name: "p", Sandbox: true, From: "cri-o"}, true},
		"cri-o sandbox by type": {map[string]string{annKubeNamespace: "ml", annKubeName: "p", annCRIOType: "sandbox"},
			Pod{Namespace: "ml", Name: "p", Sandbox: true, From: "cri-o"}, true},
		"none":  {map[string]string{"org.opencontainers.image.title": "x"}, Pod{}, false},
		"nil":   {nil, Pod{}, false},
		"empty": {map[string]string{annCRINamespace: "", annKubeName: ""}, Pod{}, false},
	} {
		got, ok := PodOf(tc.ann)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses (fs/proc/array.c prints
	// it as it is).
	in := "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	got, err := parseProcStat([]byte(in))
	testutil.CheckParse(t, got, err, procStat{State: 'S', StartTime: 987654}, false)
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) SS 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1", "1 (x) S 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 -4"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	in := "9:name=systemd:/x\n5:devices:/x\n0::/x:with:colons\n"
	got, err := parseProcCgroup([]byte(in))
	want := []cgroupLine{{"9:name=systemd", "/x"}, {"5:devices", "/x"}, {"0:", "/x:with:colons"}}
	testutil.CheckParse(t, got, err, want, false)
	for _, bad := range []string{"", "\n", "garbage", "x::/", "0::relative", "0:/"} {
		if _, err := parseProcCgroup([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestWithin(t *testing.T) {
	init := []cgroupLine{{"5:devices", "/ctr"}, {"4:memory", "/ctr"}, {"6:misc", "/"}, {"0:", "/ctr"}}
	for name, tc := range map[string]struct {
		member []cgroupLine
		ok     bool
	}{
		"same cgroups":  {[]cgroupLine{{"5:devices", "/ctr"}, {"4:memory", "/ctr"}, {"6:misc", "/"}, {"0:", "/ctr"}}, true},
		"nested below":  {[]cgroupLine{{"5:devices", "/ctr/sub"}, {"4:memory", "/ctr/sub"}, {"0:", "/ctr/sub"}}, true},
		"host process":  {[]cgroupLine{{"5:devices", "/"}, {"4:memory", "/"}, {"6:misc", "/"}, {"0:", "/"}}, false},
		"shares one":    {[]cgroupLine{{"5:devices", "/ctr"}, {"4:memory", "/other"}, {"0:", "/ctr"}}, false},
		"name prefix":   {[]cgroupLine{{"5:devices", "/ctr2"}, {"4:memory", "/ctr2"}, {"0:", "/ctr2"}}, false},
		"no hierarchy":  {[]cgroupLine{{"7:pids", "/ctr"}}, false},
		"only root one": {[]cgroupLine{{"6:misc", "/"}}, false},
	} {
		if ok, _ := within(tc.member, init); ok != tc.ok {
			t.Errorf("%s: within = %v, want %v", name, ok, tc.ok)
		}
	}
	if ok, _ := within(init, []cgroupLine{{"0:", "/"}}); ok {
		t.Error("a container whose init is in the root cgroup would hold every process")
	}
}

func TestParsePIDFile(t *testing.T) {
	for in, want := range map[string]int{"123\n": 123, "7": 7, " 9 \n": 9} {
		if got, err := parsePIDFile([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "\n", "0", "-1", "abc", "4194305", "1 2", "99999999999999999999"} {
		if _, err := parsePIDFile([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseRuncState(f *testing.F) {
	f.Add([]byte(runcStateSample))
	f.Add([]byte(`{"init_process_start":"12","config":{"labels":["=","bundle","a=b=c"]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseRuncState(b)
		if err == nil && (st.PID < 0 || st.PID > maxPID) {
			t.Fatalf("PID %d accepted", st.PID)
		}
		// What a snapshot keeps parses as the host's file did: to the same
		// state, or to an error again (a replay names the same problem).
		if out := redactRuncState(b); out != nil {
			kept, kerr := parseRuncState(out)
			if (err == nil) != (kerr == nil) || (err == nil && !cmp.Equal(st, kept)) {
				t.Fatalf("kept %s parses to %+v, %v; the host's to %+v, %v", out, kept, kerr, st, err)
			}
		}
	})
}

func FuzzParseCrunStatus(f *testing.F) {
	f.Add([]byte(crunStatusSample))
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := parseCrunStatus(b); err == nil && (st.PID < 0 || st.PID > maxPID) {
			t.Fatalf("PID %d accepted", st.PID)
		}
		redactCrunStatus(b)
	})
}

func FuzzParseCRIOState(f *testing.F) {
	f.Add([]byte(`{"id":"c","pid":1,"initPid":1,"initStartTime":"5","annotations":{"a":"b"}}`))
	f.Add([]byte(`{"initStartTime":12}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseCRIOState(b)
		if out := redactCRIOState(b); out != nil && !json.Valid(out) {
			t.Fatalf("invalid JSON kept from %q", b)
		}
	})
}

func FuzzParseProc(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 1 1 0 0 1 1 0 0 20 0 1 0 5 1 1 1"), []byte("0::/\n1:cpu:/a\n"))
	f.Fuzz(func(t *testing.T, stat, cg []byte) {
		parseProcStat(stat)
		parsePIDFile(stat)
		if ls, err := parseProcCgroup(cg); err == nil {
			within(ls, ls)
		}
	})
}
