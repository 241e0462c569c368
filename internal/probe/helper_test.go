package probe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHelperOutput(t *testing.T) {
	out := `{"lib":"nvml","begin":"dlopen"}
{"lib":"nvml","loaded":"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.86.10"}
{"lib":"nvml","step":{"name":"dlopen","value":"libnvidia-ml.so.1","ok":true}}
{"lib":"nvml","begin":"nvmlInit_v2"}
{"lib":"nvml","step":{"name":"nvmlInit_v2","code":17,"ok":false}}
{"lib":"nvml","done":true}

{"lib":"cuda","begin":"cuInit"}
`
	nvml := &LibProbe{Lib: HelperNVML, Library: LibNVML}
	cuda := &LibProbe{Lib: HelperCUDA, Library: LibCUDA}
	if err := ParseHelperOutput(strings.NewReader(out), map[string]*LibProbe{HelperNVML: nvml, HelperCUDA: cuda}); err != nil {
		t.Fatal(err)
	}
	if !nvml.Done || nvml.Unfinished != "" || len(nvml.Steps) != 2 || nvml.Loaded == "" {
		t.Errorf("nvml %+v", nvml)
	}
	if f := nvml.FirstFailure(); f == nil || f.CodeName != "NVML_ERROR_OPERATING_SYSTEM" {
		t.Errorf("first failure %+v", f)
	}
	if cuda.Done || cuda.Unfinished != "cuInit" {
		t.Errorf("cuda %+v: want cuInit unfinished", cuda)
	}
	for name, bad := range map[string]string{
		"not json":      "{oops\n",
		"unasked lib":   `{"lib":"opencl","done":true}` + "\n",
		"too long line": `{"lib":"cuda","begin":"` + strings.Repeat("x", maxHelperLine) + `"}` + "\n",
		"too many":      strings.Repeat(`{"lib":"cuda","begin":"x"}`+"\n", maxHelperLines+1),
	} {
		l := &LibProbe{Lib: HelperCUDA}
		if err := ParseHelperOutput(strings.NewReader(bad), map[string]*LibProbe{HelperCUDA: l}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if rc := LookupResult(CUDAResults, 12345, "CUresult"); rc.Name != "CUresult 12345" {
		t.Errorf("unknown code named %q", rc.Name)
	}
}

// TestResultTables: the codes are unique, named after their enum, and the
// values a probe of a broken container sees carry a cause.
func TestResultTables(t *testing.T) {
	for _, tab := range []struct {
		prefix string
		codes  []ResultCode
		causes []int
	}{
		{"CUDA_", CUDAResults, []int{34, 35, 100, 304, 803}},
		{"NVML_", NVMLResults, []int{4, 9, 17, 18, 999}},
	} {
		seen := map[int]bool{}
		for _, c := range tab.codes {
			if seen[c.Code] {
				t.Errorf("%s: code %d twice", tab.prefix, c.Code)
			}
			seen[c.Code] = true
			if !strings.HasPrefix(c.Name, tab.prefix) || c.Meaning == "" {
				t.Errorf("%+v", c)
			}
		}
		for _, code := range tab.causes {
			if LookupResult(tab.codes, code, "").Cause == "" {
				t.Errorf("%s%d has no cause", tab.prefix, code)
			}
		}
	}
	// Spot checks against the headers.
	for code, name := range map[int]string{34: "CUDA_ERROR_STUB_LIBRARY", 100: "CUDA_ERROR_NO_DEVICE", 304: "CUDA_ERROR_OPERATING_SYSTEM", 803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 999: "CUDA_ERROR_UNKNOWN"} {
		if got := LookupResult(CUDAResults, code, "").Name; got != name {
			t.Errorf("CUresult %d: %s, want %s", code, got, name)
		}
	}
	for code, name := range map[int]string{9: "NVML_ERROR_DRIVER_NOT_LOADED", 17: "NVML_ERROR_OPERATING_SYSTEM", 18: "NVML_ERROR_LIB_RM_VERSION_MISMATCH", 28: "NVML_ERROR_GPU_NOT_FOUND"} {
		if got := LookupResult(NVMLResults, code, "").Name; got != name {
			t.Errorf("nvmlReturn_t %d: %s, want %s", code, got, name)
		}
	}
}

func FuzzParseHelperOutput(f *testing.F) {
	f.Add([]byte(`{"lib":"cuda","begin":"cuInit"}` + "\n" + `{"lib":"cuda","step":{"name":"cuInit","code":100}}` + "\n"))
	f.Add([]byte(`{"lib":"nvml","done":true}`))
	f.Add([]byte("\n\n{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		libs := map[string]*LibProbe{HelperCUDA: {Lib: HelperCUDA}, HelperNVML: {Lib: HelperNVML}}
		ParseHelperOutput(strings.NewReader(string(b)), libs)
		for _, l := range libs {
			if len(l.Steps) > maxHelperLines {
				t.Fatalf("%d steps", len(l.Steps))
			}
		}
	})
}

// TestRunWithoutLibraries is what a machine with no NVIDIA driver gets:
// both library steps NOT_RUN, each naming every place searched, and no
// helper started.
func TestRunWithoutLibraries(t *testing.T) {
	dev := t.TempDir()
	r := Run(context.Background(), Options{Dev: dev, HelperPath: "/nonexistent/helper", Env: []string{"LD_LIBRARY_PATH=/nonexistent/lib"}})
	for _, l := range []LibProbe{r.CUDA, r.NVML} {
		if !strings.HasPrefix(l.NotRun, l.Library+" not found in /nonexistent/lib (LD_LIBRARY_PATH), "+LdCachePath) || l.Helper != "" {
			t.Errorf("%s: %q", l.Library, l.NotRun)
		}
	}
	if len(r.Nodes) != 0 || len(r.DevErrors) != 0 || r.Dev != dev {
		t.Errorf("%+v", r)
	}
	if r.Process.PID != os.Getpid() || r.Process.CapEff == "" {
		t.Errorf("process %+v", r.Process)
	}
	r = Run(context.Background(), Options{Dev: dev, NoLibraries: true})
	if !strings.Contains(r.CUDA.NotRun, "not asked") {
		t.Errorf("%q", r.CUDA.NotRun)
	}
}

// TestHelperWithoutItsLoader: a helper whose PT_INTERP is absent here is
// NOT_RUN with the loader named, not started. The ELF is this machine's
// /bin/sh with its interpreter path rewritten in place.
func TestHelperWithoutItsLoader(t *testing.T) {
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip(err)
	}
	f, _ := os.Open("/bin/sh")
	interp, err := ProgramInterpreter(f)
	f.Close()
	if err != nil || interp == "" || len(interp) < 10 {
		t.Skip("/bin/sh is not dynamically linked")
	}
	fake := "/nonexist" + strings.Repeat("x", len(interp)-len("/nonexist"))
	b := []byte(strings.Replace(string(sh), interp+"\x00", fake+"\x00", 1))
	p := filepath.Join(t.TempDir(), HelperName)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	hf, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	l := &LibProbe{Lib: HelperCUDA, Library: LibCUDA}
	RunHelper(context.Background(), Helper{File: hf, Path: p}, []*LibProbe{l})
	if !strings.Contains(l.NotRun, fake) || !strings.Contains(l.NotRun, "dynamic loader") || l.Helper != "" {
		t.Errorf("%+v", l)
	}
}
