package cdi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testbin"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// nvidiaSpec is a CDI spec in the shape the NVIDIA container toolkit's
// generator writes (the published CDI format: a kind, devices by index,
// UUID and "all", global edits with the control nodes, the driver's
// libraries as bind mounts and the hooks that link them), written for
// these tests. Its fields need cdiVersion 0.5.0 (device names starting
// with a digit).
const nvidiaSpec = `---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: GPU-4b1d2c7e-5f7a-4e3b-9c1d-0a2b3c4d5e6f
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  - path: /dev/nvidia-uvm
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, create-symlinks, --link, libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so]
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options: [ro, nosuid, nodev, bind]
  - hostPath: /usr/bin/nvidia-smi
    containerPath: /usr/bin/nvidia-smi
    options: [ro, nosuid, nodev, bind]
`

// allOnlySpec declares nothing but "all": it does not resolve
// nvidia.com/gpu=0.
const allOnlySpec = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
    - path: /dev/nvidiactl
`

// gpuManifest describes the host's NVIDIA nodes.
const gpuManifest = `/dev/nvidia0 c 195:0 0666 0:0
/dev/nvidiactl c 195:255 0666 0:0
/dev/nvidia-uvm c 235:0 0666 0:0
`

// hostTree writes a host tree: the files, the device manifest, and the
// executables (path -> mode).
func hostTree(t testing.TB, files map[string]string, manifest string, execs map[string]os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	if files == nil {
		files = map[string]string{}
	}
	for p := range execs {
		if _, ok := files[p]; !ok {
			files[p] = "#!/bin/sh\n"
		}
	}
	testutil.WriteTree(t, dir, files, nil, manifest)
	for p, m := range execs {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
	// Directories a host has, so that an absent path in them is absence.
	for _, d := range []string{"dev", "usr/bin", "usr/lib/x86_64-linux-gnu", "etc/cdi", "var/run/cdi"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// gpuHost is a healthy NVIDIA host with the spec in /etc/cdi.
func gpuHost(t testing.TB, spec string) map[string]string {
	return map[string]string{
		"/etc/cdi/nvidia.yaml":                           spec,
		"/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15": "ELF",
		"/usr/bin/nvidia-smi":                            "ELF",
	}
}

var hookExec = map[string]os.FileMode{"/usr/bin/nvidia-cdi-hook": 0o755}

func openRoot(t testing.TB, dir string) *hostfs.Root {
	t.Helper()
	r, err := hostfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func hasKind(fs Facts, k Kind) bool { return len(fs.OfKind(k)) > 0 }

func mustKind(t testing.TB, fs Facts, k Kind) Fact {
	t.Helper()
	got := fs.OfKind(k)
	if len(got) == 0 {
		t.Fatalf("no %s fact; facts: %s", k, dump(fs))
	}
	return got[0]
}

func noKind(t testing.TB, fs Facts, ks ...Kind) {
	t.Helper()
	for _, k := range ks {
		if got := fs.OfKind(k); len(got) > 0 {
			t.Errorf("unexpected %s: %s", k, got[0].Summary)
		}
	}
}

func dump(fs Facts) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("\n  " + string(f.Kind) + " [" + f.Subject + "] " + f.Summary)
	}
	return b.String()
}

// goTool is the go command of the toolchain running the tests.
func goTool(t testing.TB) string {
	t.Helper()
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no go command at %s to build a test binary", p)
	}
	return p
}

var (
	buildMu    sync.Mutex
	buildCache = map[string][]byte{}
)

// fakeRuntime builds a tiny Go program whose build information lists
// the CDI library at cdiVer (and specs-go at specsVer, when not ""), as
// a runtime vendoring it would: a vendor directory with stand-in
// packages, built with -mod=vendor, offline. ldVersion, when not "", is
// stamped with -ldflags -X .../version.Version, as release builds do.
// cdiVer "" builds a binary with no dependency at all. The binary's
// bytes are returned.
func fakeRuntime(t testing.TB, cdiVer, specsVer, ldVersion string) []byte {
	t.Helper()
	key := cdiVer + "|" + specsVer + "|" + ldVersion
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := buildCache[key]; ok {
		return b
	}
	gocmd := goTool(t)
	files := map[string]string{
		"version/version.go": "package version\n\nvar Version = \"unset\"\n",
	}
	gomod := "module example.com/fakeruntime\n\ngo 1.22\n"
	main := "package main\n\nimport (\n\t\"example.com/fakeruntime/version\"\n"
	body := "func main() {\n\tprintln(version.Version)\n"
	if cdiVer != "" {
		gomod += "\nrequire tags.cncf.io/container-device-interface " + cdiVer + "\n"
		modules := "# tags.cncf.io/container-device-interface " + cdiVer + "\n## explicit; go 1.20\ntags.cncf.io/container-device-interface/pkg/cdi\n"
		files["vendor/tags.cncf.io/container-device-interface/pkg/cdi/cdi.go"] = "package cdi\n\nfunc Name() string { return \"cdi\" }\n"
		main += "\tcdi \"tags.cncf.io/container-device-interface/pkg/cdi\"\n"
		body += "\tprintln(cdi.Name())\n"
		if specsVer != "" {
			gomod += "require tags.cncf.io/container-device-interface/specs-go " + specsVer + "\n"
			modules += "# tags.cncf.io/container-device-interface/specs-go " + specsVer + "\n## explicit; go 1.19\ntags.cncf.io/container-device-interface/specs-go\n"
			files["vendor/tags.cncf.io/container-device-interface/specs-go/specs.go"] = "package specs\n\nconst CurrentVersion = \"x\"\n"
			main += "\tspecs \"tags.cncf.io/container-device-interface/specs-go\"\n"
			body += "\tprintln(specs.CurrentVersion)\n"
		}
		files["vendor/modules.txt"] = modules
	}
	files["go.mod"] = gomod
	files["main.go"] = main + ")\n\n" + body + "}\n"
	// -trimpath drops -ldflags from the build information (it may hold
	// paths): a stamped version needs a build without it.
	var args []string
	if ldVersion == "" {
		args = append(args, "-trimpath")
	}
	if cdiVer != "" {
		args = append(args, "-mod=vendor")
	}
	if ldVersion != "" {
		args = append(args, "-ldflags=-X example.com/fakeruntime/version.Version="+ldVersion)
	}
	// Kept on disk too, by what it is built from: each test binary, and
	// each fuzzing worker (a process of its own), would otherwise pay a go
	// build of its own, seconds on a cold build cache.
	cached, ok := fakeRuntimeCache(files, args)
	if ok {
		if b, err := os.ReadFile(cached); err == nil {
			buildCache[key] = b
			return b
		}
	}
	dir := t.TempDir()
	testutil.WriteTree(t, dir, files, nil, "")
	out := filepath.Join(dir, "fakeruntime")
	cmd := exec.Command(gocmd, append(append([]string{"build", "-o", out}, args...), ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=", "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fake runtime: %v\n%s", err, o)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if ok && os.MkdirAll(filepath.Dir(cached), 0o755) == nil {
		// Renamed into place: a reader never sees half a binary.
		if tmp, err := os.CreateTemp(filepath.Dir(cached), ".fakeruntime-"); err == nil {
			_, werr := tmp.Write(b)
			if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), cached) != nil {
				os.Remove(tmp.Name())
			}
		}
	}
	buildCache[key] = b
	return b
}

// fakeRuntimeCache is where the fake runtime built from files with args is
// kept: in testbin's cache directory, named by the hash of the toolchain,
// the build's arguments and its sources.
func fakeRuntimeCache(files map[string]string, args []string) (string, bool) {
	dir, err := testbin.CacheDir()
	if err != nil {
		return "", false
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s/%s\x00%s\x00%s\x00%q\x00", runtime.Version(), runtime.GOOS, runtime.GOARCH, os.Getenv("GOAMD64"), os.Getenv("GOEXPERIMENT"), args)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(h, "%q\x00%q\x00", name, files[name])
	}
	return filepath.Join(dir, "fakeruntime", hex.EncodeToString(h.Sum(nil)[:16])), true
}

// installBinary puts a binary into a host tree.
func installBinary(t testing.TB, dir, p string, b []byte) {
	t.Helper()
	full := filepath.Join(dir, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
