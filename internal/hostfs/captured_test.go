package hostfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCoversTree(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"sys/bus/pci/devices", "proc/driver"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := MustNew(dir)
	cases := map[string]bool{
		"/sys/bus/pci/devices":        true,  // present
		"/sys/bus/pci/devices/0000:x": true,  // parent in the tree: absent on the host
		"/dev/nvidia0":                false, // the tree has no /dev at all
		"/proc/driver/nvidia/version": false, // /proc/driver/nvidia was never captured
		"/proc/driver/nvidia":         true,
		"/etc/ld.so.cache":            false,
	}
	for p, want := range cases {
		if got := r.Covers(p); got != want {
			t.Errorf("Covers(%s) = %v, want %v", p, got, want)
		}
	}
	if !MustNew("/").Covers("/nonexistent/thing") {
		t.Error("the live host covers everything")
	}
}

// A recorded snapshot knows what its readers asked about: a path asked
// about and missing is absent on the host, a path never asked about is not
// covered, and a child of a listed directory is covered.
func TestCoversRecordedSnapshot(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "dev"), 0o755)
	os.MkdirAll(filepath.Join(dir, "proc"), 0o755)
	os.MkdirAll(filepath.Join(dir, "sys", "class", "drm"), 0o755)
	os.MkdirAll(filepath.Join(dir, "proc", "driver", "nvidia"), 0o755) // the tree covers version: its absence is the host's
	os.WriteFile(filepath.Join(dir, "proc", "devices"), []byte("Character devices:\n"), 0o644)
	src := MustNew(dir)
	rec := src.Record()
	src.ReadDir("/dev")
	src.ReadFile("/proc/devices")
	src.ReadFile("/sys/class/drm/card0/dev") // asked about, absent
	src.Lstat("/proc/driver/nvidia/version")
	src.Lstat("/proc/bus/pci/devices") // the tree has no /proc/bus: not the host's absence
	var buf bytes.Buffer
	if _, err := src.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	r, cleanup, err := OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	m, ok := r.ReadSnapshotMeta()
	if !ok || m.Format != SnapshotFormat || m.SelfPID != 0 { // a tree's /proc/self is not the snapshot taker
		t.Fatalf("meta %+v %v", m, ok)
	}
	cases := map[string]bool{
		"/proc/devices":                  true,
		"/proc/driver/nvidia/version":    true,  // asked, absent
		"/proc/driver/nvidia/version/x":  true,  // below an absent path
		"/dev/nvidia0":                   true,  // /dev was listed whole
		"/dev/dri/card0":                 true,  // /dev was listed whole: no dri in it
		"/proc/self/mountinfo":           false, // never asked about
		"/proc/bus/pci/devices":          false, // asked, but the source tree could not have shown it
		"/sys/class/drm/card0/dev":       false, // asked, but the source tree has no card0 directory: its parent rule does not cover it
		"/sys/class/drm/card1/dev":       false, // drm never listed, card1 never asked
		"/sys/bus/pci/devices/0000:00.0": false,
	}
	for p, want := range cases {
		if got := r.Covers(p); got != want {
			t.Errorf("Covers(%s) = %v, want %v", p, got, want)
		}
	}
}

func FuzzParseCoverage(f *testing.F) {
	f.Add([]byte("absent /a\nlisted /b\n"))
	f.Add([]byte("absent\nlisted x\n\x00 /\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &coverage{absent: map[string]bool{}, listed: map[string]bool{}}
		parseCoverage(b, c)
		for p := range c.absent {
			if p == "" || p[0] != '/' {
				t.Fatalf("absent %q", p)
			}
		}
	})
}
