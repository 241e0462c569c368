package pci

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// lspciFunc is what lspci -vmm says about one function, in lspci's
// spelling: class without prog-if ("0302"), ids in hex.
type lspciFunc struct {
	Class, ProgIf, Vendor, Device, SVendor, SDevice, Rev, Driver string
}

// TestScanLiveMatchesLspci compares Scan of this machine with pciutils'
// machine-readable output (`lspci -D -n -vmm -k`: -vmm is lspci's
// documented parsable format; -k adds "Driver:").
func TestScanLiveMatchesLspci(t *testing.T) {
	if _, err := exec.LookPath("lspci"); err != nil {
		t.Skip("lspci is not installed")
	}
	out, err := exec.Command("lspci", "-D", "-n", "-vmm", "-k").Output()
	if err != nil {
		t.Skipf("lspci failed: %v", err)
	}
	want := map[string]lspciFunc{}
	var slot string
	var cur lspciFunc
	flush := func() {
		if slot != "" {
			// lspci omits Rev and ProgIf when they are zero.
			if cur.Rev == "" {
				cur.Rev = "00"
			}
			if cur.ProgIf == "" {
				cur.ProgIf = "00"
			}
			want[slot] = cur
		}
		slot, cur = "", lspciFunc{}
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":\t")
		if !ok {
			flush()
			continue
		}
		switch k {
		case "Slot":
			slot = v
		case "Class":
			cur.Class = v
		case "ProgIf":
			cur.ProgIf = v
		case "Vendor":
			cur.Vendor = v
		case "Device":
			cur.Device = v
		case "SVendor":
			cur.SVendor = v
		case "SDevice":
			cur.SDevice = v
		case "Rev":
			cur.Rev = v
		case "Driver":
			cur.Driver = v
		}
	}
	flush()
	if len(want) == 0 {
		t.Skip("lspci lists no PCI function on this machine")
	}

	inv, err := Scan(hostfs.MustNew("/"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lspciFunc{}
	for _, d := range inv.Devices {
		if len(d.Errors) > 0 {
			t.Errorf("%s: %v", d.Address, d.Errors)
		}
		f := lspciFunc{
			Class: fmt.Sprintf("%04x", d.Class>>8), ProgIf: fmt.Sprintf("%02x", d.Class&0xff),
			Vendor: fmt.Sprintf("%04x", d.Vendor), Device: fmt.Sprintf("%04x", d.Device),
			Rev: fmt.Sprintf("%02x", d.Revision), Driver: d.Driver,
		}
		// lspci prints no subsystem for ids 0000:0000 or header types without one.
		if d.Has(HasSubsystem) && !(d.SubsystemVendor == 0 && d.SubsystemDevice == 0) {
			f.SVendor, f.SDevice = fmt.Sprintf("%04x", d.SubsystemVendor), fmt.Sprintf("%04x", d.SubsystemDevice)
		}
		got[d.Address.String()] = f
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Scan vs lspci (-lspci +scan):\n%s", diff)
	}
	t.Logf("%d functions match lspci; names from %q", len(got), inv.IDsPath)
}

// BenchmarkScanLive measures a whole scan of this machine, pci.ids
// included: `check` must stay well under 20 ms on an 8-GPU host.
func BenchmarkScanLive(b *testing.B) {
	root := hostfs.MustNew("/")
	if _, err := Scan(root); err != nil {
		b.Skipf("no PCI bus here: %v", err)
	}
	for b.Loop() {
		if _, err := Scan(root); err != nil {
			b.Fatal(err)
		}
	}
}
