package devnode

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
	"github.com/google/go-cmp/cmp"
)

const procDevicesNVIDIA = `Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
  4 ttyS
 10 misc
195 nvidia-frontend
226 drm
234 nvidia-nvswitch
235 nvidia-caps
236 nvidia-uvm
511 nvidia-nvlink

Block devices:
  7 loop
  8 sd
259 blkext
`

func TestParseProcDevices(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    ProcDevices
		wantErr bool
	}{{
		name: "nvidia host",
		in:   procDevicesNVIDIA,
		want: ProcDevices{
			Char: map[uint32][]string{1: {"mem"}, 4: {"/dev/vc/0", "tty", "ttyS"}, 10: {"misc"}, 195: {"nvidia-frontend"},
				226: {"drm"}, 234: {"nvidia-nvswitch"}, 235: {"nvidia-caps"}, 236: {"nvidia-uvm"}, 511: {"nvidia-nvlink"}},
			Block: map[uint32][]string{7: {"loop"}, 8: {"sd"}, 259: {"blkext"}},
		},
	}, {
		name: "empty",
		in:   "",
		want: ProcDevices{Char: map[uint32][]string{}, Block: map[uint32][]string{}},
	}, {
		name: "duplicate line kept once",
		in:   "Character devices:\n 10 misc\n 10 misc\n",
		want: ProcDevices{Char: map[uint32][]string{10: {"misc"}}, Block: map[uint32][]string{}},
	}, {
		name:    "entry before a section",
		in:      "  1 mem\n",
		wantErr: true,
	}, {
		name:    "major not a number",
		in:      "Character devices:\nxx mem\n",
		wantErr: true,
	}, {
		name:    "major beyond dev_t",
		in:      "Character devices:\n4096 big\n",
		wantErr: true,
	}, {
		name:    "no name",
		in:      "Character devices:\n 12\n",
		wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProcDevices(strings.NewReader(tt.in))
			testutil.CheckParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestProcDevicesLookup(t *testing.T) {
	pd, err := ParseProcDevices(strings.NewReader(procDevicesNVIDIA))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := pd.CharMajor("nvidia-uvm"); !ok || m != 236 {
		t.Errorf("CharMajor(nvidia-uvm) = %d, %v; want 236", m, ok)
	}
	if _, ok := pd.CharMajor("loop"); ok {
		t.Error("CharMajor(loop) found a block name")
	}
	if m, ok := pd.BlockMajor("loop"); !ok || m != 7 {
		t.Errorf("BlockMajor(loop) = %d, %v; want 7", m, ok)
	}
	if !pd.CharRegistered(195) || pd.CharRegistered(240) {
		t.Error("CharRegistered: want 195 registered and 240 not")
	}
	if d := cmp.Diff([]string{"/dev/vc/0", "tty", "ttyS"}, pd.CharNames(4)); d != "" {
		t.Errorf("CharNames(4): %s", d)
	}
}

func TestParseProcDevicesLive(t *testing.T) {
	f, err := os.Open("/proc/devices")
	if err != nil {
		t.Skipf("no /proc/devices: %v", err)
	}
	defer f.Close()
	pd, err := ParseProcDevices(f)
	if err != nil {
		t.Fatalf("live /proc/devices: %v", err)
	}
	// mem (1) and misc (10) are registered by every Linux kernel
	// (drivers/char/mem.c, drivers/char/misc.c).
	if m, ok := pd.CharMajor("mem"); !ok || m != 1 {
		t.Errorf("mem major = %d, %v; want 1", m, ok)
	}
	if m, ok := pd.CharMajor("misc"); !ok || m != 10 {
		t.Errorf("misc major = %d, %v; want 10", m, ok)
	}
}

func FuzzParseProcDevices(f *testing.F) {
	f.Add([]byte(procDevicesNVIDIA))
	f.Add([]byte("Character devices:\n"))
	f.Add([]byte("Block devices:\n 7 loop\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pd, err := ParseProcDevices(strings.NewReader(string(b)))
		if err != nil && !errors.Is(err, ErrSkippedLines) {
			t.Fatalf("an in-memory parse failed otherwise than by skipping lines: %v", err)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Fatalf("error of %d bytes", len(err.Error()))
		}
		for maj, names := range pd.Char {
			if maj >= 1<<12 || len(names) == 0 {
				t.Fatalf("char major %d names %q", maj, names)
			}
			for _, n := range names {
				if m, ok := pd.CharMajor(n); !ok || m > maj {
					t.Fatalf("CharMajor(%q) = %d, %v; %q is under %d", n, m, ok, n, maj)
				}
			}
		}
	})
}

// TestParseProcDevicesSkipsBadLines: a bad or 64 KiB line is skipped and
// named, and the lines around it are kept (bufio.Scanner used to lose the
// whole file to one line over 64 KiB).
func TestParseProcDevicesSkipsBadLines(t *testing.T) {
	long := strings.Repeat("x", 70<<10)
	in := "Character devices:\n  1 mem\n" + long + "\n195 nvidia-frontend\nzz bad\n236 nvidia-uvm\n"
	pd, err := ParseProcDevices(strings.NewReader(in))
	if !errors.Is(err, ErrSkippedLines) || !strings.Contains(err.Error(), "2 line(s)") || !strings.Contains(err.Error(), "the first line 3") {
		t.Errorf("err = %v", err)
	}
	if err != nil && len(err.Error()) > 300 {
		t.Errorf("the error quotes the whole line: %d bytes", len(err.Error()))
	}
	want := map[uint32][]string{1: {"mem"}, 195: {"nvidia-frontend"}, 236: {"nvidia-uvm"}}
	if d := cmp.Diff(want, pd.Char); d != "" {
		t.Errorf("kept lines (-want +got):\n%s", d)
	}
}
