package iommu

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// scanKernelConfig is the parser parseKernelConfig replaced (bufio.Scanner,
// a map of the kept options): the reference the tests compare against.
func scanKernelConfig(r io.Reader) (map[string]string, error) {
	want := map[string]bool{}
	for _, o := range kconfigOptions {
		want[o] = true
	}
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16<<10), 1<<16)
	for sc.Scan() {
		line := sc.Bytes()
		if name, ok := bytes.CutPrefix(line, []byte("# ")); ok {
			if name, ok = bytes.CutSuffix(name, []byte(" is not set")); ok && want[string(name)] {
				out[string(name)] = "n"
			}
			continue
		}
		if name, v, ok := bytes.Cut(line, []byte("=")); ok && want[string(name)] {
			out[string(name)] = strings.Trim(string(v), `"`)
		}
	}
	return out, sc.Err()
}

// syntheticConfig is a .config of about 10,000 lines (the size of a
// distribution's) with the kept options among options of every shape.
func syntheticConfig() []byte {
	var b strings.Builder
	b.WriteString("#\n# Automatically generated file; DO NOT EDIT.\n# Linux/x86 6.1.0 Kernel Configuration\n#\n")
	b.WriteString(`CONFIG_CMDLINE="` + strings.Repeat("console=ttyS0 ", 140) + "\"\n")
	for i := 0; i < 3300; i++ {
		b.WriteString("CONFIG_SOME_DRIVER_" + strings.Repeat("X", i%40) + "=m\n")
		b.WriteString("# CONFIG_OTHER_OPTION_" + strings.Repeat("Y", i%30) + " is not set\n")
		b.WriteString("\n")
		if i == 2000 {
			b.WriteString("CONFIG_IOMMU_API=y\nCONFIG_IOMMU_SUPPORT=y\n# CONFIG_INTEL_IOMMU is not set\nCONFIG_AMD_IOMMU=y\n")
			b.WriteString("# CONFIG_INTEL_IOMMU_X is not set\nCONFIG_AMD_IOMMUX=y\n# CONFIG_VIRTIO_IOMMU is not set\nCONFIG_IOMMU_DEFAULT_DMA_LAZY=\"y\"\n")
		}
	}
	b.WriteString("CONFIG_VFIO_PCI=m") // no final newline
	return []byte(b.String())
}

func TestParseKernelConfigReaders(t *testing.T) {
	text := syntheticConfig()
	want := map[string]string{"CONFIG_IOMMU_API": "y", "CONFIG_IOMMU_SUPPORT": "y", "CONFIG_INTEL_IOMMU": "n", "CONFIG_AMD_IOMMU": "y",
		"CONFIG_VIRTIO_IOMMU": "n", "CONFIG_IOMMU_DEFAULT_DMA_LAZY": "y", "CONFIG_VFIO_PCI": "m"}
	ref, err := scanKernelConfig(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, ref); diff != "" {
		t.Fatalf("reference (-want +got):\n%s", diff)
	}
	// Lines cut at every place a reader may cut them.
	for name, r := range map[string]io.Reader{
		"whole":    bytes.NewReader(text),
		"one byte": iotest.OneByteReader(bytes.NewReader(text)),
		"half":     iotest.HalfReader(bytes.NewReader(text)),
		"data+EOF": iotest.DataErrReader(bytes.NewReader(text)),
	} {
		got, err := parseKernelConfig(r)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestParseKernelConfigEdges(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     map[string]string
		err      bool
	}{
		{name: "CRLF", in: "CONFIG_IOMMU_API=y\r\n# CONFIG_VFIO is not set\r\n", want: map[string]string{"CONFIG_IOMMU_API": "y", "CONFIG_VFIO": "n"}},
		{name: "empty", in: "", want: map[string]string{}},
		{name: "a prefix of a kept name", in: "CONFIG_VFIO_P=y\n# CONFIG_VFI is not set\nCONFIG_=y\n# CONFIG_ is not set\n", want: map[string]string{}},
		{name: "no value", in: "CONFIG_VFIO\nCONFIG_VFIO_PCI=\n", want: map[string]string{"CONFIG_VFIO_PCI": ""}},
		{name: "the last line wins", in: "CONFIG_VFIO=y\n# CONFIG_VFIO is not set\n", want: map[string]string{"CONFIG_VFIO": "n"}},
		{name: "a long line, then an option", in: "# " + strings.Repeat("x", 60<<10) + "\nCONFIG_VFIO=m\n", want: map[string]string{"CONFIG_VFIO": "m"}},
		{name: "a line too long", in: "CONFIG_VFIO=y\n# " + strings.Repeat("x", 70<<10) + "\nCONFIG_IOMMUFD=y\n", want: map[string]string{"CONFIG_VFIO": "y"}, err: true},
	} {
		got, err := parseKernelConfig(iotest.HalfReader(strings.NewReader(c.in)))
		if (err != nil) != c.err {
			t.Errorf("%s: error %v, want error %v", c.name, err, c.err)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	// A reader that never moves is an error, not a hang.
	if _, err := parseKernelConfig(stuckReader{}); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("a reader giving (0, nil): %v", err)
	}
	// A reader's error is returned with what came before it.
	got, err := parseKernelConfig(io.MultiReader(strings.NewReader("CONFIG_VFIO=y\n"), iotest.ErrReader(errors.New("boom"))))
	if err == nil || err.Error() != "boom" || got["CONFIG_VFIO"] != "y" {
		t.Errorf("a failing reader: %v %v", got, err)
	}
}

type stuckReader struct{}

func (stuckReader) Read([]byte) (int, error) { return 0, nil }

// FuzzParseKernelConfig: any bytes give what the line scanner it
// replaced gave, and never a panic or a hang.
func FuzzParseKernelConfig(f *testing.F) {
	f.Add([]byte("CONFIG_INTEL_IOMMU=y\n# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set\nCONFIG_VFIO_PCI=m\n"))
	f.Add([]byte("# CONFIG_VFIO is not set\r\nCONFIG_IOMMUFD=\"m\"\r"))
	f.Add([]byte("\n\n# \nCONFIG_=\n=\n# CONFIG_VFIO is not set"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseKernelConfig(iotest.HalfReader(bytes.NewReader(b)))
		want, werr := scanKernelConfig(bytes.NewReader(b))
		if len(b) >= 60<<10 {
			return // where exactly each gives up on a long line differs
		}
		if err != nil || werr != nil {
			t.Fatalf("errors: %v, reference %v", err, werr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("(-reference +got):\n%s", diff)
		}
	})
}

// TestReadKernelConfigLive reads this machine's configuration, when it
// has one, and holds it to the reference parser over the same text.
func TestReadKernelConfigLive(t *testing.T) {
	root := hostfs.MustNew("/")
	k := ReadKernelConfig(root)
	if k.Err != nil {
		t.Skipf("no kernel configuration on this machine: %v", k.Err)
	}
	text, err := os.ReadFile(k.Source)
	if err != nil {
		t.Fatal(err)
	}
	if k.Source == ProcConfigGz {
		zr, err := gzip.NewReader(bytes.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		if text, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	want, err := scanKernelConfig(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, k.Options); diff != "" {
		t.Errorf("%s (-reference +got):\n%s", k.Source, diff)
	}
	if k.Options["CONFIG_IOMMU_SUPPORT"] == "" && !bytes.Contains(text, []byte("CONFIG_IOMMU_SUPPORT")) {
		t.Logf("%s does not mention CONFIG_IOMMU_SUPPORT", k.Source)
	}
	t.Logf("%s: %d bytes, %d options kept", k.Source, len(text), len(k.Options))
}

// BenchmarkKernelConfig: the parse alone over a distribution-sized
// configuration (the splitter and the scanner it replaced), and
// ReadKernelConfig on this machine (the inflation of /proc/config.gz
// where there is no /boot/config-RELEASE).
func BenchmarkKernelConfig(b *testing.B) {
	text := syntheticConfig()
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseKernelConfig(bytes.NewReader(text)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-scanner", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := scanKernelConfig(bytes.NewReader(text)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("live", func(b *testing.B) {
		root := hostfs.MustNew("/")
		if k := ReadKernelConfig(root); k.Err != nil {
			b.Skipf("no kernel configuration: %v", k.Err)
		}
		b.ReportAllocs()
		for b.Loop() {
			ReadKernelConfig(root)
		}
	})
}

// The matcher's first test is the byte after CONFIG_.
func TestKconfigOptionsNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range kconfigOptions {
		if !strings.HasPrefix(o, "CONFIG_") || len(o) == len("CONFIG_") || seen[o] {
			t.Errorf("%q: not a CONFIG_ option, or twice", o)
		}
		seen[o] = true
	}
}

// Read reads the kernel configuration only for an IOMMU that is off, and
// always while a snapshot is recorded (a replay must find it).
func TestReadKernelConfigOnlyWhenOff(t *testing.T) {
	for _, c := range []struct {
		host   string
		on     Tri
		record bool
		read   bool
	}{
		{host: fixture.NameHGXVFIO, on: Yes},
		{host: fixture.NameHGXVFIO, on: Yes, record: true, read: true},
		{host: fixture.NameIOMMUOff, on: No, read: true},
	} {
		root := hostfs.MustNew(filepath.Join(hostsDir, c.host))
		if c.record {
			root.Record()
		}
		inv, err := pci.Scan(root)
		if err != nil {
			t.Fatal(err)
		}
		st := Read(root, inv)
		k := st.Kernel
		if st.On != c.on {
			t.Fatalf("%s: On %v, want %v", c.host, st.On, c.on)
		}
		if k.Release == "" {
			t.Errorf("%s: no release (ReadVFIO reads modules.builtin by it)", c.host)
		}
		if got := k.Source != ""; got != c.read {
			t.Errorf("%s (recording %v): configuration read %v (%s, %v), want %v", c.host, c.record, got, k.Source, k.Err, c.read)
		}
		if !c.read && (!errors.Is(k.Err, ErrKernelConfigNotRead) || k.Enabled("CONFIG_IOMMU_API") != Unknown) {
			t.Errorf("%s: a configuration not read is %v, CONFIG_IOMMU_API %v", c.host, k.Err, k.Enabled("CONFIG_IOMMU_API"))
		}
	}
}

// When the firmware describes no IOMMU, Read still reads the kernel's
// configuration to add whether this kernel could drive one; ReadWith
// NoKernelWhenAbsent (check, nothing asked of passthrough) leaves it
// unread and says nothing of it; an IOMMU the firmware describes but the
// kernel left off is explained from the configuration either way.
func TestNoKernelWhenAbsent(t *testing.T) {
	const rel = "6.1.0-test"
	cfg := "CONFIG_IOMMU_API=y\n# CONFIG_INTEL_IOMMU is not set\n# CONFIG_AMD_IOMMU is not set\n# CONFIG_VIRTIO_IOMMU is not set\n"
	files := map[string]string{
		"/sys/firmware/acpi/tables/FACP": "x",
		"/sys/kernel/iommu_groups/.keep": "",
		"/proc/cmdline":                  "ro quiet\n",
		OSReleasePath:                    rel + "\n",
		"/boot/config-" + rel:            cfg,
	}
	dir := t.TempDir()
	testutil.WriteTree(t, dir, files, nil, "")
	os.Remove(filepath.Join(dir, "sys/kernel/iommu_groups/.keep"))
	root := hostfs.MustNew(dir)
	drive := func(st *State) bool {
		return slices.ContainsFunc(st.Reasons, func(r string) bool { return strings.Contains(r, "could not drive such an IOMMU") })
	}
	full := Read(root, nil)
	if full.On != No || full.Vendor != "" || full.Kernel.Source == "" || !drive(full) {
		t.Fatalf("Read: on %v vendor %q config %q, reasons %q", full.On, full.Vendor, full.Kernel.Source, full.Reasons)
	}
	lean := ReadWith(root, nil, ReadOptions{NoKernelWhenAbsent: true})
	if lean.On != No || !errors.Is(lean.Kernel.Err, ErrKernelConfigNotRead) || drive(lean) || lean.Kernel.Release != rel {
		t.Errorf("ReadWith NoKernelWhenAbsent: on %v kernel %+v, reasons %q", lean.On, lean.Kernel, lean.Reasons)
	}
	// A DMAR: the firmware describes an Intel IOMMU that is off; the
	// configuration says why, with the option or without.
	testutil.WriteTree(t, dir, map[string]string{"/sys/firmware/acpi/tables/DMAR": "DMAR"}, nil, "")
	off := ReadWith(hostfs.MustNew(dir), nil, ReadOptions{NoKernelWhenAbsent: true})
	if off.Vendor != "Intel VT-d" || off.Kernel.Source == "" {
		t.Errorf("an Intel IOMMU that is off: vendor %q, configuration %q (%v)", off.Vendor, off.Kernel.Source, off.Kernel.Err)
	}
}
