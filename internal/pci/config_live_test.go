package pci

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// liveInventory scans this machine; it skips where there is no PCI bus.
func liveInventory(t *testing.T) (*Inventory, *hostfs.Root) {
	t.Helper()
	root := hostfs.MustNew("/")
	inv, err := Scan(root)
	if err != nil || len(inv.Devices) == 0 {
		t.Skipf("no PCI functions on this machine (%v)", err)
	}
	return inv, root
}

// TestLiveConfigAsRoot reads the config of this machine's functions with
// CAP_SYS_ADMIN: the whole space the kernel exposes (256 bytes for the
// virtio devices of a VM, 4096 for PCIe ones), the header agreeing with
// sysfs, and the decoding agreeing with this host's lspci.
func TestLiveConfigAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: config space beyond 64 bytes is readable only with CAP_SYS_ADMIN")
	}
	inv, root := liveInventory(t)
	seen := checkConfigAgainstSysfs(t, "live", inv, root)
	if seen[ExtentUnprivileged] > 0 || seen[ExtentTruncated] > 0 || seen[ExtentFull]+seen[ExtentLegacy] != len(inv.Devices) {
		t.Errorf("extents %v for %d functions, want every one whole", seen, len(inv.Devices))
	}
	if _, err := exec.LookPath("lspci"); err != nil {
		t.Skip("lspci is not installed")
	}
	out, err := exec.Command("lspci", "-D", "-vvv", "-xxxx").Output()
	if err != nil {
		t.Skipf("lspci: %v", err)
	}
	fns, err := parseLspci(string(out))
	if err != nil {
		t.Fatal(err)
	}
	var st lspciStats
	for _, f := range fns {
		a, err := ParseAddress(f.Slot)
		d := inv.Lookup(a)
		if err != nil || d == nil {
			t.Errorf("lspci shows %s, Scan does not", f.Slot)
			continue
		}
		c, err := ReadConfig(root, d)
		if err != nil {
			t.Errorf("%s: %v", f.Slot, err)
			continue
		}
		if string(f.Hex) != string(c.Raw) {
			t.Errorf("%s: lspci's hex (%d bytes) and sysfs config (%d bytes) differ", f.Slot, len(f.Hex), len(c.Raw))
		}
		for _, diff := range compareLspci(f, c, &st) {
			t.Errorf("%s: %s", f.Slot, diff)
		}
	}
	if st.caps == 0 {
		t.Errorf("no capability compared with lspci (%+v)", st)
	}
	t.Logf("compared %d functions with lspci: %+v", len(fns), st)
}

// TestLiveConfigUnprivileged reads the config files without
// CAP_SYS_ADMIN: as root it drops every capability on one locked thread
// first (the kernel checks the opener's credentials, file_ns_capable in
// pci_read_config); as any other user it reads them as it is. The answer
// is 64 bytes, the header intact, and every capability "not readable
// without CAP_SYS_ADMIN", never absent.
func TestLiveConfigUnprivileged(t *testing.T) {
	inv, root := liveInventory(t)
	asRoot := os.Geteuid() == 0
	type result struct {
		cfgs []*Config
		err  error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capset(&hdr, &data[0]); err != nil && asRoot {
			done <- result{err: err}
			return
		}
		var r result
		for _, d := range inv.Devices {
			c, err := ReadConfig(root, d)
			if err != nil {
				r.err = err
				break
			}
			r.cfgs = append(r.cfgs, c)
		}
		done <- r
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i, c := range r.cfgs {
		d := inv.Devices[i]
		if c.Extent != ExtentUnprivileged || len(c.Raw) != ConfigHeaderSize {
			t.Errorf("%s: %d bytes, extent %v, want the 64-byte header", d.Address, len(c.Raw), c.Extent)
		}
		if c.Vendor != d.Vendor || c.Device != d.Device || c.Class != d.Class {
			t.Errorf("%s: header %04x:%04x %06x, sysfs %s %06x", d.Address, c.Vendor, c.Device, c.Class, d.IDString(), d.Class)
		}
		if c.Status&statusCapList == 0 {
			continue
		}
		for what, err := range map[string]error{"capabilities": c.CapsErr, "extended capabilities": c.ExtCapsErr, "ACS": second(c.ACS())} {
			if !errors.Is(err, ErrConfigUnprivileged) || errors.Is(err, ErrCapAbsent) {
				t.Errorf("%s: %s without CAP_SYS_ADMIN: %v", d.Address, what, err)
			}
		}
	}
}
