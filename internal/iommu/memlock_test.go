package iommu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

func explain(m *Memlock) string { return strings.Join(m.Explain, "\n") }

func u64(n uint64) *uint64 { return &n }

// An L40S of the fixture trees: a 16 MiB register BAR, a 64 GiB frame
// buffer and a 32 MiB BAR (internal/fixture gpuSpec).
const l40sBARs = 16<<20 + 64<<30 + 32<<20

func memlockOf(t *testing.T, h fixture.Host, req MemlockRequest) *Memlock {
	t.Helper()
	root, _, inv, v := vfioVariant(t, h)
	return ReadMemlock(root, inv, v, req)
}

// The fixture's QEMU: 8 MiB of RLIMIT_MEMLOCK for a 32 GiB guest and two
// GPUs found through the groups it holds open; no CAP_IPC_LOCK.
func TestMemlockBelowGuestAndBARs(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPU4SwitchACS)
	m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(32 << 30)})
	if m.Limit == nil || m.Limit.Soft != fixture.QEMUMemlock || m.Limit.Hard != fixture.QEMUMemlock || !m.Limits.OK() {
		t.Fatalf("limit %+v (%s)", m.Limit, m.Limits)
	}
	if m.Comm != "qemu-system-x86" || m.CapIPCLock != No || m.InitialUserNS != Yes || m.Exempt != No || m.Locked == nil || *m.Locked != 0 {
		t.Errorf("comm %q cap %v initial ns %v exempt %v locked %v", m.Comm, m.CapIPCLock, m.InitialUserNS, m.Exempt, m.Locked)
	}
	var devs []pci.Address
	for _, d := range m.Devices {
		if d.Err != nil || d.Bytes != l40sBARs || len(d.BARs) != 3 {
			t.Errorf("%s: %d bytes in %d BARs, %v", d.Address, d.Bytes, len(d.BARs), d.Err)
		}
		devs = append(devs, d.Address)
	}
	if diff := cmp.Diff(addrs("0000:03:00.0", "0000:04:00.0"), devs); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	if len(m.DevicesFrom) != 2 || !strings.Contains(m.DevicesFrom[0], "PID 5150 (qemu-system-x86) holds /dev/vfio/4 open (/proc/5150/fd/18)") {
		t.Errorf("from %q", m.DevicesFrom)
	}
	if !m.BARsKnown || m.BARBytes != 2*l40sBARs || m.Charged != 32<<30 || m.Need != 32<<30+2*l40sBARs || !m.NeedKnown {
		t.Errorf("bars %d known %v charged %d need %d", m.BARBytes, m.BARsKnown, m.Charged, m.Need)
	}
	if m.BelowCharged != Yes || m.BelowNeed != Yes {
		t.Errorf("below charged %v need %v", m.BelowCharged, m.BelowNeed)
	}
	e := explain(m)
	for _, w := range []string{
		"RLIMIT_MEMLOCK soft 8 MiB, hard 8 MiB (/proc/5150/limits)",
		"guest memory 32 GiB: given",
		"memory BARs of 0000:03:00.0: BAR0 16 MiB, BAR1 64 GiB (64-bit, prefetchable), BAR3 32 MiB (64-bit, prefetchable)",
		"lacks CAP_IPC_LOCK",
		"ENOMEM", "vfio_pin_pages_remote: RLIMIT_MEMLOCK (8388608) exceeded", "VFIO_MAP_DMA failed: Cannot allocate memory",
		"not charged",
	} {
		if !strings.Contains(e, w) {
			t.Errorf("explanation lacks %q:\n%s", w, e)
		}
	}
	if m.Guest.Cmdline.State != runtime.ReadNotRead {
		t.Errorf("a given size reads no command line: %s", m.Guest.Cmdline)
	}

	// Without a size, the tree (no live procfs) has no command line to
	// read: not captured, and the comparisons that need it are unknown.
	m = memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID})
	if m.Guest.Known || m.Guest.Cmdline.State != runtime.ReadNotCaptured || m.NeedKnown || m.BelowCharged != Unknown || m.BelowNeed != Unknown {
		t.Errorf("guest %+v need known %v below %v/%v", m.Guest, m.NeedKnown, m.BelowCharged, m.BelowNeed)
	}
	if !strings.Contains(explain(m), "not captured") || !m.BARsKnown {
		t.Errorf("%s", explain(m))
	}

	// Devices given override the held ones.
	m = memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(1 << 30), Devices: addrs("0000:05:00.0")})
	if len(m.Devices) != 1 || m.Devices[0].Address != addrs("0000:05:00.0")[0] || m.DevicesFrom[0] != "given" {
		t.Errorf("%+v", m.Devices)
	}
	m = memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(1 << 30), Devices: addrs("0000:77:00.0")})
	if m.BARsKnown || m.NeedKnown || m.BelowNeed != Unknown || m.BelowCharged != Yes {
		t.Errorf("unknown device: %+v", m)
	}
}

// Each change to the process changes what is said.
func TestMemlockVariants(t *testing.T) {
	good := fixtureHost(t, fixture.NameGPU4SwitchACS)
	p := "/proc/5150"
	status, _ := good.File(p + "/status")
	t.Run("unlimited", func(t *testing.T) {
		h := good.Clone()
		lim, _ := h.File(p + "/limits")
		h.SetString(p+"/limits", strings.Replace(string(lim), "8388608              8388608", "unlimited            unlimited", 1))
		m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(32 << 30)})
		if m.Limit == nil || m.Limit.Soft != runtime.RLimInfinity || m.BelowCharged != No || m.BelowNeed != No || strings.Contains(explain(m), "ENOMEM") {
			t.Errorf("%+v\n%s", m.Limit, explain(m))
		}
	})
	t.Run("enough for the guest, not the budget", func(t *testing.T) {
		h := good.Clone()
		lim, _ := h.File(p + "/limits")
		h.SetString(p+"/limits", strings.Replace(string(lim), "8388608              8388608", "34359738368          34359738368", 1))
		m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(32 << 30)})
		if m.BelowCharged != No || m.BelowNeed != Yes || !strings.Contains(explain(m), "covers the guest memory 32 GiB but not the budget") {
			t.Errorf("%v %v\n%s", m.BelowCharged, m.BelowNeed, explain(m))
		}
	})
	t.Run("CAP_IPC_LOCK", func(t *testing.T) {
		h := good.Clone()
		h.SetString(p+"/status", strings.Replace(string(status), "CapEff:\t0000000000000000", "CapEff:\t0000000000004000", 1))
		m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(32 << 30)})
		if m.CapIPCLock != Yes || m.Exempt != Yes || m.BelowCharged != Yes || strings.Contains(explain(m), "ENOMEM") ||
			!strings.Contains(explain(m), "do not apply the limit") {
			t.Errorf("cap %v exempt %v\n%s", m.CapIPCLock, m.Exempt, explain(m))
		}
		// The same capability in a user namespace of its own counts for
		// nothing: capable() asks the initial namespace.
		h.SetString(p+"/uid_map", "         0     100000      65536\n")
		m = memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(32 << 30)})
		if m.CapIPCLock != Yes || m.InitialUserNS != No || m.Exempt != No || !strings.Contains(explain(m), "user namespace of its own") || !strings.Contains(explain(m), "ENOMEM") {
			t.Errorf("cap %v ns %v exempt %v\n%s", m.CapIPCLock, m.InitialUserNS, m.Exempt, explain(m))
		}
	})
	t.Run("malformed limits", func(t *testing.T) {
		h := good.Clone()
		h.SetString(p+"/limits", "Limit x\nMax locked memory lots\n")
		m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(32 << 30)})
		if m.Limit != nil || m.Limits.State != runtime.ReadMalformed || m.BelowCharged != Unknown {
			t.Errorf("%+v %s", m.Limit, m.Limits)
		}
	})
	t.Run("malformed status", func(t *testing.T) {
		h := good.Clone()
		h.SetString(p+"/status", strings.Replace(string(status), "CapEff:\t0000000000000000", "CapEff:\tzz", 1))
		m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(32 << 30)})
		if m.CapIPCLock != Unknown || m.Exempt != Unknown || m.Status.State != runtime.ReadMalformed || !strings.Contains(explain(m), "is not known") {
			t.Errorf("cap %v %s\n%s", m.CapIPCLock, m.Status, explain(m))
		}
	})
	t.Run("no such process", func(t *testing.T) {
		m := memlockOf(t, good.Clone(), MemlockRequest{PID: 31337, Guest: u64(1 << 30)})
		if m.Status.State != runtime.ReadNotCaptured || m.Limit != nil || m.BelowCharged != Unknown || m.DevicesErr == nil {
			t.Errorf("%s %+v %v", m.Status, m.Limit, m.DevicesErr)
		}
	})
	t.Run("holds nothing", func(t *testing.T) {
		h := good.Clone()
		for _, fd := range []string{"/fd/17", "/fd/18", "/fd/19"} {
			h.Remove(p + fd)
		}
		m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID, Guest: u64(1 << 30)})
		if len(m.Devices) != 0 || !m.BARsKnown || m.Need != 1<<30 || !strings.Contains(explain(m), "holds no VFIO group or device open") {
			t.Errorf("%+v\n%s", m.Devices, explain(m))
		}
	})
}

// Below the floor the guest's size is not needed: the fixture's QEMU
// (qemu-system-x86, on an Intel host) with 64 KiB pins nothing an x86
// guest needs; at the floor it is not below it; the tree's 8 MiB is above
// it and leaves the answer to the guest's size.
func TestMemlockFloor(t *testing.T) {
	good := fixtureHost(t, fixture.NameGPU4SwitchACS)
	p := "/proc/5150"
	lim, _ := good.File(p + "/limits")
	for _, c := range []struct {
		soft  string
		below Tri
	}{
		{"65536", Yes}, {"73727", Yes}, {"73728", No}, {"8388608", No}, {"0", Yes},
	} {
		h := good.Clone()
		h.SetString(p+"/limits", strings.Replace(string(lim), "8388608              8388608", fmt.Sprintf("%-20s %-20s", c.soft, "unlimited"), 1))
		m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID})
		if m.Limit == nil || m.Floor != QEMUx86MinPinned || m.BelowFloor != c.below || m.Guest.Known {
			t.Errorf("soft %s: limit %+v floor %d below %v", c.soft, m.Limit, m.Floor, m.BelowFloor)
			continue
		}
		e := explain(m)
		if says := strings.Contains(e, "whatever the guest's size"); says != (c.below == Yes) {
			t.Errorf("soft %s: explanation (below %v):\n%s", c.soft, c.below, e)
		}
		if c.below == Yes && !strings.Contains(e, "was not set by libvirt") {
			t.Errorf("soft %s: libvirt's 1 GiB not named:\n%s", c.soft, e)
		}
	}
	// Unreadable limits decide nothing.
	h := good.Clone()
	h.SetString(p+"/limits", "garbage\n")
	if m := memlockOf(t, h, MemlockRequest{PID: fixture.QEMUPID}); m.BelowFloor != Unknown {
		t.Errorf("garbage limits: below the floor %v", m.BelowFloor)
	}
}

// The floor by process: a QEMU running x86 guests (by its name, or a KVM
// QEMU on an x86 host) pins 72 KiB at least; anything else one page.
func TestMemlockFloorByProcess(t *testing.T) {
	for _, c := range []struct {
		argv0, comm string
		x86Host     bool
		want        uint64
	}{
		{"/usr/bin/qemu-system-x86_64", "", false, QEMUx86MinPinned},
		{"", "qemu-system-x86", false, QEMUx86MinPinned}, // comm: 15 bytes of qemu-system-x86_64
		{"", "qemu-system-i38", false, QEMUx86MinPinned},
		{"/usr/libexec/qemu-kvm", "qemu-kvm", true, QEMUx86MinPinned},
		{"/usr/libexec/qemu-kvm", "qemu-kvm", false, MinPageSize},
		{"/usr/bin/qemu-system-aarch64", "", true, MinPageSize},
		{"/usr/bin/dpdk-testpmd", "dpdk-testpmd", true, MinPageSize},
		{"", "", true, MinPageSize},
	} {
		got, why := MemlockFloor(c.argv0, c.comm, c.x86Host)
		if got != c.want || why == "" {
			t.Errorf("%q %q x86 %v: %d (%s), want %d", c.argv0, c.comm, c.x86Host, got, why, c.want)
		}
	}
	if QEMUx86MinPinned != 72<<10 || QEMUx86MinPinned%MinPageSize != 0 {
		t.Errorf("the x86 floor %d is not 72 KiB in whole pages", QEMUx86MinPinned)
	}
}

func TestMemoryBARsSkipROMAndUnassigned(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPU4SwitchACS)
	dev, _ := h.Link("/sys/bus/pci/devices/0000:03:00.0")
	h.SetString(dev+"/resource", strings.Join([]string{
		"0x0000000090000000 0x0000000090ffffff 0x0000000000040200", // BAR0 16 MiB
		"0x0000000000000000 0x0000000000000000 0x0000000000000000",
		"0x0000000000000000 0x0000000000ffffff 0x0000000020140200", // unset
		"0x0000000000000000 0x0000000000000000 0x0000000000000000",
		"0x0000000000000000 0x0000000000000000 0x0000000000000000",
		"0x0000000000003000 0x000000000000307f 0x0000000000040101", // I/O
		"0x0000000091000000 0x000000009107ffff 0x0000000000046200", // ROM
		"0x0000380000000000 0x00003800ffffffff 0x000000000014220c", // a VF BAR
	}, "\n")+"\n")
	root, _, inv, _ := vfioVariant(t, h)
	bars, sum, err := MemoryBARs(root, inv.Lookup(addrs("0000:03:00.0")[0]))
	if err != nil || len(bars) != 1 || bars[0].Index != 0 || sum != 16<<20 {
		t.Errorf("%+v %d %v", bars, sum, err)
	}
}

func TestParseQEMUMemory(t *testing.T) {
	for _, tc := range []struct {
		args   string
		size   uint64
		dflt   bool
		slots  uint64
		maxmem uint64
	}{
		{"-m 16G", 16 << 30, false, 0, 0},
		{"-m size=16384", 16 << 30, false, 0, 0},
		{"-m 16384", 16 << 30, false, 0, 0},
		{"--m 2048", 2 << 30, false, 0, 0},
		{"-m size=16777216k", 16 << 30, false, 0, 0}, // libvirt's form
		{"-m 1.5G", 3 << 29, false, 0, 0},
		{"-m 1.5g", 3 << 29, false, 0, 0},
		{"-m 4G,slots=4,maxmem=16G", 4 << 30, false, 4, 16 << 30},
		{"-m 4G -m maxmem=8G", 4 << 30, false, 0, 8 << 30},
		{"-m 4G -m 8G", 8 << 30, false, 0, 0},
		{"-m 1000B", 8192, false, 0, 0},
		{"-m 0x400M", 1 << 30, false, 0, 0},
		{"-m 1.k", 8192, false, 0, 0},
		{"-name guest=vm1 -smp 4", QEMUDefaultRAM, true, 0, 0},
		{"-m slots=2,maxmem=4G", QEMUDefaultRAM, true, 2, 4 << 30},
		{"-m size=1G,slots=0x10", 1 << 30, false, 16, 0},
		{"-m 8193B", 16384, false, 0, 0},
		{"-m 0.5G", 1 << 29, false, 0, 0},
	} {
		argv := append([]string{"qemu-system-x86_64"}, strings.Fields(tc.args)...)
		q, err := ParseQEMUMemory(argv)
		if err != nil || q.Size != tc.size || q.Default != tc.dflt || q.Slots != tc.slots || q.MaxMem != tc.maxmem {
			t.Errorf("%s: %+v %v", tc.args, q, err)
		}
	}
	for _, args := range []string{
		"-m", "-m 1.5", "-m 16Q", "-m -1", "-m size=", "-m foo=1", "-m 1e3G", "-m 1.5e3", "-m 99999999999999999999",
		"-m 17179869184T", "-m 0", "-m 0B", "-m 16G,slots", "-m 16G,=1", "-m G", "-m 16GB", "-m 16G,maxmem=1x", "-m 16G,slots=z",
		"-m 0x", "-m 0x1.5G", "-m 18446744073709551615B", "-m 17592186044416",
	} {
		argv := append([]string{"qemu-system-x86_64"}, strings.Fields(args)...)
		if q, err := ParseQEMUMemory(argv); err == nil {
			t.Errorf("%s: %+v, want an error", args, q)
		}
	}
	// ",," is a literal comma: the size then has a trailing ",x".
	if _, err := ParseQEMUMemory([]string{"qemu", "-m", "4G,,x"}); err == nil {
		t.Error("4G,,x parsed")
	}
	// An empty value gives no size: QEMU's default.
	if q, err := ParseQEMUMemory([]string{"qemu", "-m", ""}); err != nil || !q.Default {
		t.Errorf("empty: %+v %v", q, err)
	}
}

func TestParseProcCmdline(t *testing.T) {
	for in, want := range map[string][]string{
		"qemu-system-x86_64\x00-m\x0016G\x00": {"qemu-system-x86_64", "-m", "16G"},
		"a\x00\x00b\x00":                      {"a", "", "b"},
		"no terminator":                       {"no terminator"},
		"":                                    nil,
		"\x00":                                nil,
	} {
		if got := ParseProcCmdline([]byte(in)); !cmp.Equal(got, want) {
			t.Errorf("%q: %q", in, got)
		}
	}
	for argv0, want := range map[string]bool{"/usr/bin/qemu-system-x86_64": true, "/usr/libexec/qemu-kvm": true, "qemu-system-aarch64": true,
		"/usr/bin/dpdk-testpmd": false, "qemu-img": false, "virt-launcher": false} {
		if IsQEMU([]string{argv0}, "") != want {
			t.Errorf("%s: %v", argv0, !want)
		}
	}
	if !IsQEMU(nil, "qemu-kvm") || IsQEMU(nil, "sleep") {
		t.Error("comm")
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1000: "1000 B", 8 << 20: "8 MiB", 64 << 30: "64 GiB",
		l40sBARs: "65584 MiB (64.05 GiB)", 1025: "1025 B (1.00 KiB)", 1<<63 + 1: "9223372036854775809 B (8.00 EiB)"} {
		if got := humanBytes(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

func FuzzParseQEMUMemory(f *testing.F) {
	for _, s := range []string{"qemu\x00-m\x0016G", "qemu\x00-m\x00size=16384,slots=4,maxmem=64G", "qemu\x00--m\x001.5G\x00-m\x00maxmem=0x10G",
		"qemu\x00-m\x00,,,,", "qemu\x00-m\x00size=1e3G", "qemu\x00-m\x0018446744073709551615", "qemu\x00-m\x00.5G"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		argv := ParseProcCmdline(b)
		q, err := ParseQEMUMemory(argv)
		if err != nil {
			return
		}
		if q.Size == 0 || q.Size%8192 != 0 || q.Default && q.Size != QEMUDefaultRAM || !q.Default && len(q.Args) == 0 {
			t.Fatalf("%q: %+v", argv, q)
		}
	})
}

func FuzzParseQEMUSize(f *testing.F) {
	for _, s := range []string{"16G", "1.5G", "0x10M", "16384", "1.k", "99999999999999999999", "1e3G", ".5G", "0.0000000000000000001E"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseQEMUSize(s)
		if err != nil {
			return
		}
		// What parsed has a number first and no white space; a bare
		// decimal is that number.
		if s == "" || s[0] < '0' || s[0] > '9' || strings.ContainsAny(s, " \t\n") {
			t.Fatalf("%q parsed to %d", s, n)
		}
		if allDigits(s) && len(s) < 20 {
			var want uint64
			for _, c := range s {
				want = want*10 + uint64(c-'0')
			}
			if n != want {
				t.Fatalf("%q: %d", s, n)
			}
		}
	})
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// The statusKB reader takes only what the kernel writes.
func TestStatusKB(t *testing.T) {
	b := []byte("Name:\tx\nVmLck:\t    12 kB\nVmPin:\t0 MB\nVmBad:\tx kB\n")
	if n, ok := statusKB(b, "VmLck"); !ok || n != 12 {
		t.Errorf("VmLck %d %v", n, ok)
	}
	for _, k := range []string{"VmPin", "VmBad", "VmRSS"} {
		if _, ok := statusKB(b, k); ok {
			t.Errorf("%s read", k)
		}
	}
}
