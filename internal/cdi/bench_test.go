package cdi

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// bigGoBinary is a large Go binary of the toolchain (the compiler, ~20
// MB), standing in for a runtime binary.
func bigGoBinary(b *testing.B) string {
	p := filepath.Join(runtime.GOROOT(), "pkg", "tool", runtime.GOOS+"_"+runtime.GOARCH, "compile")
	if _, err := os.Stat(p); err != nil {
		b.Skip(err)
	}
	return p
}

// BenchmarkReadBuildInfo reads a binary's build information through a
// mapping: only the pages the ELF reader touches are read.
func BenchmarkReadBuildInfo(b *testing.B) {
	p := bigGoBinary(b)
	root := hostfs.MustNew("/")
	for b.Loop() {
		if _, err := ReadBuildInfo(root, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadBuildInfoWholeFile is the baseline: reading the binary
// whole first.
func BenchmarkReadBuildInfoWholeFile(b *testing.B) {
	p := bigGoBinary(b)
	for b.Loop() {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := BuildInfoFromBytes(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate8GPU validates a spec for 8 GPUs (each by index and
// UUID, with 40 library mounts) on a host that has every piece.
func BenchmarkValidate8GPU(b *testing.B) {
	var spec strings.Builder
	spec.WriteString("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n")
	man := "/dev/nvidiactl c 195:255 0666 0:0\n/dev/nvidia-uvm c 235:0 0666 0:0\n"
	for i := 0; i < 8; i++ {
		for _, name := range []string{fmt.Sprint(i), fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i)} {
			fmt.Fprintf(&spec, "- name: %q\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia%d\n", name, i)
		}
		man += fmt.Sprintf("/dev/nvidia%d c 195:%d 0666 0:0\n", i, i)
	}
	spec.WriteString("containerEdits:\n  deviceNodes:\n  - path: /dev/nvidiactl\n  - path: /dev/nvidia-uvm\n  hooks:\n  - hookName: createContainer\n    path: /usr/bin/nvidia-cdi-hook\n  mounts:\n")
	files := map[string]string{}
	for i := 0; i < 40; i++ {
		p := fmt.Sprintf("/usr/lib/x86_64-linux-gnu/libnvidia-%d.so.550.54.15", i)
		files[p] = "ELF"
		fmt.Fprintf(&spec, "  - hostPath: %s\n    containerPath: %s\n    options: [ro, nosuid, nodev, bind]\n", p, p)
	}
	files["/etc/cdi/nvidia.yaml"] = spec.String()
	dir := hostTree(b, files, man, hookExec)
	root := openRoot(b, dir)
	for b.Loop() {
		res := Validate(root, Options{})
		if len(res.Facts.OfKind(KindNodeOK)) != 18 {
			b.Fatal(dump(res.Facts))
		}
	}
}
