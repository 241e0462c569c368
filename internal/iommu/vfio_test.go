package iommu

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// vfioHost reads a committed tree's VFIO state.
func vfioHost(t *testing.T, name string) (*hostfs.Root, *State, *pci.Inventory, *VFIO) {
	t.Helper()
	root, st, inv, _ := host(t, name)
	return root, st, inv, ReadVFIO(root, st, inv)
}

// vfioVariant reads a changed copy of a fixture host.
func vfioVariant(t *testing.T, h fixture.Host, asked ...pci.Address) (*hostfs.Root, *State, *pci.Inventory, *VFIO) {
	t.Helper()
	root, st, inv, _ := variant(t, h)
	return root, st, inv, ReadVFIO(root, st, inv, asked...)
}

func whys(b *Binding) string { return strings.Join(b.Why, "\n") }

// The HGX KubeVirt node: every module loaded, the container and every
// group's node in place with the number the kernel registered, each
// accelerator bound to vfio-pci by driver_override.
func TestVFIOReadyHGX(t *testing.T) {
	_, _, inv, v := vfioHost(t, fixture.NameHGXVFIO)
	for _, name := range []string{"vfio", "vfio_iommu_type1", "vfio_pci_core", "vfio_pci"} {
		if m := v.Module(name); m == nil || m.State != ModuleLoaded || m.InitState != "live" {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if m := v.Module("iommufd"); m == nil || m.State != ModuleAbsent || !strings.Contains(m.Evidence, "modules.builtin was not readable") {
		t.Errorf("iommufd: %+v", m)
	}
	if v.Driver != Yes || v.NoIOMMU != No {
		t.Errorf("driver %v, no-IOMMU mode %v", v.Driver, v.NoIOMMU)
	}
	if p := v.Module("vfio_iommu_type1").Params["dma_entry_limit"]; p != "65535" {
		t.Errorf("dma_entry_limit %q", p)
	}
	c := v.Container
	if c.Present != Yes || c.DevMatches() != Yes || c.Node.ModeString() != "0666" || c.SysfsDev != VFIOContainerDev {
		t.Errorf("container: %s", c)
	}
	if v.IOMMUFD.Present != No {
		t.Errorf("iommufd node: %s", v.IOMMUFD)
	}

	// Independent evidence: the inventory's functions on vfio-pci.
	var onVFIO []pci.Address
	groups := map[int]bool{}
	for _, d := range inv.Devices {
		if d.Driver == "vfio-pci" {
			onVFIO = append(onVFIO, d.Address)
			groups[*d.IOMMUGroup] = true
		}
	}
	if len(onVFIO) != 28 {
		t.Fatalf("%d functions on vfio-pci in the tree, want 28 (8 GPUs, 4 NVSwitches, 16 VFs)", len(onVFIO))
	}
	var got []pci.Address
	for _, b := range v.Bindings {
		if !b.VFIO || !b.Intended() || b.Override != "vfio-pci" || b.OverrideErr != nil || !strings.Contains(whys(&b), "with driver_override vfio-pci") {
			t.Errorf("%s: %+v", b.Address, b)
		}
		got = append(got, b.Address)
	}
	if diff := cmp.Diff(onVFIO, got); diff != "" {
		t.Errorf("bindings (-want +got):\n%s", diff)
	}
	if len(v.Groups) != len(groups) {
		t.Fatalf("%d VFIO groups, want %d", len(v.Groups), len(groups))
	}
	for _, g := range v.Groups {
		if !groups[g.Group] || g.Registered != Yes || len(g.Members) != 1 {
			t.Errorf("group %s: registered %v members %v", g.Name, g.Registered, g.Members)
		}
		if g.Node.Present != Yes || g.Node.DevMatches() != Yes || g.Node.Node.ModeString() != "0600" || g.Node.WantMode != GroupMode {
			t.Errorf("group %s: %s", g.Name, g.Node)
		}
	}
}

// Each fault in a good tree changes one fact.
func TestVFIONodeFaults(t *testing.T) {
	good := fixtureHost(t, fixture.NameGPU4SwitchACS)
	node := func(h fixture.Host, p string) hostfs.Node {
		n, ok := h.Node(p)
		if !ok {
			t.Fatalf("no %s in the fixture", p)
		}
		return n
	}
	t.Run("container mode", func(t *testing.T) {
		h := good.Clone()
		n := node(h, VFIOContainerPath)
		n.Mode = 0o600
		h.SetNode(n)
		_, _, _, v := vfioVariant(t, h)
		if c := v.Container; c.Present != Yes || c.DevMatches() != Yes || c.Node.ModeString() != "0600" || c.WantMode != ContainerMode {
			t.Errorf("%s", c)
		}
	})
	t.Run("container absent", func(t *testing.T) {
		h := good.Clone()
		h.Remove(VFIOContainerPath)
		_, _, _, v := vfioVariant(t, h)
		if v.Container.Present != No || v.Container.String() != "/dev/vfio/vfio: absent" {
			t.Errorf("%s", v.Container)
		}
	})
	t.Run("group node absent", func(t *testing.T) {
		h := good.Clone()
		h.Remove("/dev/vfio/8")
		_, _, _, v := vfioVariant(t, h)
		g := v.GroupNode("8")
		if g == nil || g.Registered != Yes || g.Node.Present != No || g.Node.DevMatches() != Unknown {
			t.Fatalf("%+v", g)
		}
		if other := v.GroupNode("10"); other == nil || other.Node.Present != Yes {
			t.Errorf("group 10 changed: %+v", other)
		}
	})
	t.Run("group node with another number", func(t *testing.T) {
		h := good.Clone()
		n := node(h, "/dev/vfio/8")
		n.Minor = 7
		h.SetNode(n)
		_, _, _, v := vfioVariant(t, h)
		if g := v.GroupNode("8"); g == nil || g.Node.DevMatches() != No || !strings.Contains(g.Node.String(), "the kernel registered 243:2") {
			t.Errorf("%+v", g)
		}
	})
	t.Run("group node a symlink", func(t *testing.T) {
		// A node replaced by a link to the right node is followed.
		h := good.Clone()
		n := node(h, "/dev/vfio/8")
		h.Remove("/dev/vfio/8")
		n.Path = "/dev/vfio-real-8"
		h.SetNode(n)
		h.SetLink("/dev/vfio/8", "/dev/vfio-real-8")
		_, _, _, v := vfioVariant(t, h)
		if g := v.GroupNode("8"); g == nil || g.Node.Node.Type != hostfs.TypeSymlink || g.Node.DevMatches() != Yes {
			t.Errorf("%+v", g)
		}
	})
	t.Run("owner", func(t *testing.T) {
		// The QEMU process's groups are chowned to it; the others are not.
		_, _, _, v := vfioHost(t, fixture.NameGPU4SwitchACS)
		for name, uid := range map[string]uint32{"4": 107, "6": 107, "8": 0, "10": 0} {
			if g := v.GroupNode(name); g == nil || g.Node.Node.UID != uid || g.Node.Node.GID != uid {
				t.Errorf("group %s: %+v", name, g)
			}
		}
	})
	t.Run("group not registered", func(t *testing.T) {
		// A node left behind by a group VFIO no longer holds (its device
		// rebound to the host driver): /sys/class/vfio lists it no more.
		h := good.Clone()
		h.Remove("/sys/class/vfio/10")
		_, _, _, v := vfioVariant(t, h)
		if g := v.GroupNode("10"); g == nil || g.Registered != No || g.Node.SysfsDev != "" || g.Node.DevMatches() != Unknown {
			t.Errorf("%+v", g)
		}
	})
}

// Module states: loaded, absent, built in (no initstate, or only in
// modules.builtin), not captured.
func TestVFIOModules(t *testing.T) {
	good := fixtureHost(t, fixture.NameGPU4SwitchACS)
	t.Run("absent", func(t *testing.T) {
		h := good.Clone()
		for _, p := range h.Paths() {
			if strings.HasPrefix(p, "/sys/module/vfio") {
				h.Remove(p)
			}
		}
		_, _, _, v := vfioVariant(t, h)
		for _, name := range []string{"vfio", "vfio_pci", "vfio_pci_core", "vfio_iommu_type1"} {
			if m := v.Module(name); m.State != ModuleAbsent || m.State.Present() != No {
				t.Errorf("%s: %+v", name, m)
			}
		}
		if v.NoIOMMU != Unknown {
			t.Errorf("no-IOMMU mode %v without vfio", v.NoIOMMU)
		}
	})
	t.Run("built in, shown in sysfs", func(t *testing.T) {
		h := good.Clone()
		h.Remove("/sys/module/vfio_pci/initstate")
		_, _, _, v := vfioVariant(t, h)
		if m := v.Module("vfio_pci"); m.State != ModuleBuiltIn || !strings.Contains(m.Evidence, "no initstate") || m.Params["disable_vga"] != "N" {
			t.Errorf("%+v", m)
		}
	})
	t.Run("built in, only in modules.builtin", func(t *testing.T) {
		h := good.Clone()
		for _, p := range h.Paths() {
			if strings.HasPrefix(p, "/sys/module/vfio_pci_core/") {
				h.Remove(p)
			}
		}
		rel, _ := h.File(OSReleasePath)
		h.SetString(ModulesBuiltinPath(strings.TrimSpace(string(rel))),
			"kernel/drivers/vfio/pci/vfio-pci-core.ko\nkernel/drivers/iommu/iommufd/iommufd.ko\n")
		_, _, _, v := vfioVariant(t, h)
		if v.BuiltinErr != nil {
			t.Fatal(v.BuiltinErr)
		}
		for _, name := range []string{"vfio_pci_core", "iommufd"} {
			if m := v.Module(name); m.State != ModuleBuiltIn || !strings.Contains(m.Evidence, "modules.builtin") {
				t.Errorf("%s: %+v", name, m)
			}
		}
		if m := v.Module("vfio_pci"); m.State != ModuleLoaded {
			t.Errorf("vfio_pci: %+v", m)
		}
	})
	t.Run("not captured", func(t *testing.T) {
		// A capture without /sys/module says nothing of modules.
		h := good.Clone()
		for _, p := range h.Paths() {
			if strings.HasPrefix(p, "/sys/module/") {
				h.Remove(p)
			}
		}
		for _, p := range h.Paths() {
			if strings.HasSuffix(p, "/module") && strings.HasPrefix(p, "/sys/bus/pci/drivers/") {
				h.Remove(p)
			}
		}
		_, _, _, v := vfioVariant(t, h)
		for _, m := range v.Modules {
			if m.State != ModuleUnknown || m.State.Present() != Unknown {
				t.Errorf("%s: %+v", m.Name, m)
			}
		}
	})
}

// The IOMMU-off host: the H100 is meant for vfio-pci (driver_override)
// and unbound, and the reason is the missing IOMMU group.
func TestVFIOBindingNoIOMMU(t *testing.T) {
	_, _, _, v := vfioHost(t, fixture.NameIOMMUOff)
	if len(v.Bindings) != 1 {
		t.Fatalf("bindings %+v", v.Bindings)
	}
	b := v.Bindings[0]
	if b.Address != addrs("0000:01:00.0")[0] || b.VFIO || !b.Intended() || b.Override != "vfio-pci" || b.Driver != "" || b.Group != nil {
		t.Errorf("%+v", b)
	}
	if w := whys(&b); !strings.Contains(w, "driver_override is vfio-pci and no driver is bound") ||
		!strings.Contains(w, "no IOMMU group") || !strings.Contains(w, "EINVAL") || !strings.Contains(w, "the IOMMU is off") {
		t.Errorf("why:\n%s", w)
	}
	if v.Driver != Yes || len(v.Groups) != 0 {
		t.Errorf("driver %v groups %+v", v.Driver, v.Groups)
	}
	// Without the module, the reason is the module.
	h := fixtureHost(t, fixture.NameIOMMUOff)
	h.Remove(VFIOPCIDriverDir + "/module")
	_, _, _, v = vfioVariant(t, h)
	if b := v.Binding(addrs("0000:01:00.0")[0]); b == nil || v.Driver != No || !strings.Contains(whys(b), "vfio-pci is not registered") {
		t.Errorf("driver %v binding %+v", v.Driver, b)
	}
}

// vfio-pci.ids from the command line and from modprobe.d mark devices
// meant for vfio-pci; one already on another driver says which.
func TestVFIOIDSources(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPUAudio)
	cmd, _ := h.File(CmdlinePath)
	h.SetString(CmdlinePath, strings.TrimSpace(string(cmd))+" vfio-pci.ids=10de:2684\n")
	h.SetString("/etc/modprobe.d/vfio.conf", "# GPU passthrough\noptions vfio-pci ids=10de:22ba disable_vga=1\nsoftdep snd_hda_intel pre: vfio-pci\n")
	// The same name in a later directory is hidden by /etc's.
	h.SetString("/usr/lib/modprobe.d/vfio.conf", "options vfio_pci ids=dead:beef\n")
	h.SetString("/usr/lib/modprobe.d/other.conf", "options vfio_pci \\\n  ids=1234:5678\n")
	_, _, _, v := vfioVariant(t, h)
	var from []string
	for _, s := range v.IDs {
		from = append(from, s.From+" "+s.Raw)
		if len(s.Errs) > 0 {
			t.Errorf("%s: %v", s.From, s.Errs)
		}
	}
	want := []string{"/proc/cmdline 10de:2684", "/etc/modprobe.d/vfio.conf:2 10de:22ba", "/usr/lib/modprobe.d/other.conf:1 1234:5678"}
	if diff := cmp.Diff(want, from); diff != "" {
		t.Errorf("id sources (-want +got):\n%s", diff)
	}
	if len(v.Softdeps) != 1 || v.Softdeps[0].Module != "snd_hda_intel" || v.Softdeps[0].Line != 3 {
		t.Errorf("softdeps %+v", v.Softdeps)
	}
	gpu, audio := v.Binding(addrs("0000:01:00.0")[0]), v.Binding(addrs("0000:01:00.1")[0])
	if gpu == nil || !gpu.VFIO || !cmp.Equal(gpu.IDsFrom, []string{"/proc/cmdline"}) {
		t.Errorf("gpu %+v", gpu)
	}
	if audio == nil || audio.VFIO || !audio.Intended() || audio.Driver != "snd_hda_intel" ||
		!strings.Contains(whys(audio), "10de:22ba is in vfio-pci's ids (/etc/modprobe.d/vfio.conf:2) but snd_hda_intel is bound") {
		t.Errorf("audio %+v", audio)
	}
	if !strings.Contains(v.DynamicIDs, "new_id") || !strings.Contains(v.DynamicIDs, "cannot be read back") {
		t.Errorf("dynamic ids: %s", v.DynamicIDs)
	}

	// Without the ids the audio function is not a binding, unless asked
	// about.
	_, _, _, v = vfioHost(t, fixture.NameGPUAudio)
	if v.Binding(addrs("0000:01:00.1")[0]) != nil {
		t.Error("an audio function nothing marks for vfio-pci is a binding")
	}
	_, _, _, v = vfioVariant(t, fixtureHost(t, fixture.NameGPUAudio), addrs("0000:01:00.1")...)
	if b := v.Binding(addrs("0000:01:00.1")[0]); b == nil || !b.Asked || !strings.Contains(whys(b), "bound to snd_hda_intel, not to a VFIO driver") {
		t.Errorf("asked: %+v", b)
	}
}

// A device on vfio-pci that nothing names was bound by hand; one whose
// override names vfio-pci but is still on its old driver says the
// override waits for the next probe.
func TestVFIOBindingWhy(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPUAudio)
	gpu, _ := h.Link("/sys/bus/pci/devices/0000:01:00.0")
	audio, _ := h.Link("/sys/bus/pci/devices/0000:01:00.1")
	h.SetString(audio+"/driver_override", "vfio-pci\n")
	_, _, _, v := vfioVariant(t, h)
	if b := v.Binding(addrs("0000:01:00.1")[0]); b == nil || !strings.Contains(whys(b), "applies at the next probe") {
		t.Errorf("audio: %+v", b)
	}
	if b := v.Binding(addrs("0000:01:00.0")[0]); b == nil || !strings.Contains(whys(b), "bound by hand") {
		t.Errorf("gpu: %+v", b)
	}
	// An override naming another driver keeps vfio-pci's ids away.
	h = fixtureHost(t, fixture.NameGPUAudio)
	h.SetString(gpu+"/driver_override", "nvidia\n")
	_, _, _, v = vfioVariant(t, h, addrs("0000:01:00.0")...)
	if b := v.Binding(addrs("0000:01:00.0")[0]); b == nil || !strings.Contains(whys(b), "driver_override is nvidia") {
		t.Errorf("gpu: %+v", b)
	}
}

// The device cdev and /dev/iommu, with iommufd loaded.
func TestVFIODeviceCDev(t *testing.T) {
	h := fixtureHost(t, fixture.NameGPU4SwitchACS)
	dev, _ := h.Link("/sys/bus/pci/devices/0000:03:00.0")
	h.SetString(dev+"/vfio-dev/vfio0/dev", "511:0\n")
	h.SetNode(hostfs.Node{Path: "/dev/vfio/devices/vfio0", Type: hostfs.TypeChar, Major: 511, Minor: 0, Mode: 0o600})
	h.SetString("/sys/module/iommufd/initstate", "live\n")
	h.SetString("/sys/devices/virtual/misc/iommu/dev", "10:123\n")
	h.SetLink("/sys/class/misc/iommu", "/sys/devices/virtual/misc/iommu")
	h.SetNode(hostfs.Node{Path: IOMMUFDPath, Type: hostfs.TypeChar, Major: 10, Minor: 123, Mode: 0o660})
	_, _, _, v := vfioVariant(t, h)
	b := v.Binding(addrs("0000:03:00.0")[0])
	if b == nil || b.CDev == nil || b.CDev.Name != "vfio0" || b.CDev.Node.DevMatches() != Yes || b.CDev.Node.WantMode != DeviceMode {
		t.Fatalf("%+v", b)
	}
	if v.IOMMUFD.DevMatches() != Yes || v.IOMMUFD.Node.ModeString() != "0660" || v.Module("iommufd").State != ModuleLoaded {
		t.Errorf("iommufd %s, module %+v", v.IOMMUFD, v.Module("iommufd"))
	}
	if !contains(v.GroupTargets(), "/dev/vfio/devices/vfio0") || !contains(v.GroupTargets(), "/dev/vfio/4") {
		t.Errorf("targets %v", v.GroupTargets())
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// The QEMU process of the gpu4-switch-acs tree holds the container and
// two groups; a second process holding one of them is found too, and the
// sentence for the busy group gives the errnos.
func TestFindHolders(t *testing.T) {
	root, _, _, v := vfioHost(t, fixture.NameGPU4SwitchACS)
	s := FindHolders(root, v.GroupTargets())
	if s.Err != nil || s.NotCaptured || !s.Complete() || s.Processes != 1 {
		t.Fatalf("%+v", s)
	}
	var got []string
	for _, h := range s.Holders {
		got = append(got, fmt.Sprintf("%d %s %d %s", h.PID, h.Comm, h.FD, h.Matched))
	}
	want := []string{"5150 qemu-system-x86 17 /dev/vfio/vfio", "5150 qemu-system-x86 18 /dev/vfio/4", "5150 qemu-system-x86 19 /dev/vfio/6"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("holders (-want +got):\n%s", diff)
	}
	if len(s.HeldBy("/dev/vfio/8")) != 0 {
		t.Error("group 8 is held by nobody")
	}

	h := fixtureHost(t, fixture.NameGPU4SwitchACS)
	h.SetString("/proc/6160/comm", "dpdk-testpmd\n")
	h.SetLink("/proc/6160/fd/5", "/dev/vfio/4")
	h.SetLink("/proc/6160/fd/6", "/dev/null")
	root, _, _, v = vfioVariant(t, h)
	s = FindHolders(root, v.GroupTargets())
	held := s.HeldBy("/dev/vfio/4")
	if len(held) != 2 || held[0].PID != 5150 || held[1].PID != 6160 || held[1].Comm != "dpdk-testpmd" {
		t.Fatalf("held by %+v", held)
	}
	msg := GroupBusy("4", held)
	for _, w := range []string{"PID 6160 (dpdk-testpmd) holds /dev/vfio/4 open (/proc/6160/fd/5)", "EBUSY", "vfio_group_fops_open", "EPERM", "iommu_group_claim_dma_owner"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q lacks %q", msg, w)
		}
	}
	if GroupBusy("8", nil) != "" {
		t.Error("a group nobody holds is busy")
	}
}

// A tree that captured no fd table says so instead of "nobody holds it".
func TestFindHoldersNotCaptured(t *testing.T) {
	root, _, _, v := vfioHost(t, fixture.NameGPU4SwitchNoACS)
	s := FindHolders(root, v.GroupTargets())
	if !s.NotCaptured || s.Complete() || len(s.Holders) != 0 {
		t.Errorf("%+v", s)
	}
	dir := t.TempDir()
	testutil.WriteTree(t, dir, map[string]string{"sys/x": ""}, nil, "")
	s = FindHolders(hostfs.MustNew(dir), []string{"/dev/vfio/1"})
	if s.Err == nil || !errors.Is(s.Err, fs.ErrNotExist) {
		t.Errorf("no /proc: %+v", s)
	}
}

func TestMatchTarget(t *testing.T) {
	targets := []string{"/dev/vfio/5", "/dev/vfio/vfio"}
	for link, want := range map[string]string{
		"/dev/vfio/5":                           "/dev/vfio/5",
		"/dev/vfio/5 (deleted)":                 "/dev/vfio/5",
		"/run/containerd/x/rootfs/dev/vfio/5":   "/dev/vfio/5",
		"/dev/vfio/15":                          "",
		"/dev/vfio/55":                          "",
		"anon_inode:[vfio-device]":              "",
		"socket:[1234]":                         "",
		"../../../dev/vfio/vfio":                "/dev/vfio/vfio",
		"/dev/vfio/vfio2":                       "",
		"/home/u/dev/vfio/vfio":                 "/dev/vfio/vfio",
		"":                                      "",
		"/proc/1/fd/../../../../dev/vfio/5/../": "",
	} {
		if _, got := matchTarget("/proc/1/fd/3", link, targets); got != want {
			t.Errorf("%q: %q, want %q", link, got, want)
		}
	}
}

func TestParsePCIIDs(t *testing.T) {
	ids, errs := ParsePCIIDs("10de:2330,,10DE:22ba:ffffffff:ffffffff:030000:ff0000, 1234:5678 ,bogus,12,0x8086:0x1234:zz,abcd:ef01:1:2:3:4:5:6")
	var got []string
	for _, id := range ids {
		got = append(got, fmt.Sprintf("%x:%x:%x:%x:%x:%x", id.Vendor, id.Device, id.SubVendor, id.SubDevice, id.Class, id.ClassMask))
	}
	want := []string{"10de:2330:ffffffff:ffffffff:0:0", "10de:22ba:ffffffff:ffffffff:30000:ff0000",
		"1234:5678:ffffffff:ffffffff:0:0", "8086:1234:ffffffff:ffffffff:0:0", "abcd:ef01:1:2:3:4"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "invalid id string") {
		t.Errorf("errors %v", errs)
	}

	d := &pci.Device{Present: pci.HasVendor | pci.HasDevice | pci.HasClass | pci.HasSubsystem, Vendor: 0x10de, Device: 0x22ba,
		SubsystemVendor: 0x10de, SubsystemDevice: 0x167c, Class: 0x040300}
	for s, want := range map[string]bool{
		"10de:22ba":           true,
		"10de:2330":           false,
		"ffffffff:22ba":       true,
		"10de:22ba:10de:167c": true,
		"10de:22ba:10de:1234": false,
		"10de:22ba:ffffffff:ffffffff:040300:ffff00": true,
		"10de:22ba:ffffffff:ffffffff:030000:ff0000": false,
	} {
		ids, _ := ParsePCIIDs(s)
		if len(ids) != 1 || ids[0].Matches(d) != want {
			t.Errorf("%s: %v, want %v", s, ids, want)
		}
	}
	if (PCIID{Vendor: PCIAnyID, Device: PCIAnyID}).Matches(&pci.Device{}) {
		t.Error("a device whose ids were not read matches")
	}
}

func TestParseModprobeConf(t *testing.T) {
	in := "# comment\n" +
		"options vfio-pci ids=10de:2330 disable_vga=1\n" +
		"options nvidia NVreg_X=1\n" +
		"  options   vfio_pci   ids=1:2\n" +
		"options vfio-pci \\\n  ids=3:4\n" +
		"softdep nouveau pre: vfio-pci\n" +
		"softdep snd_hda_intel pre: vfio_pci post: x\n" +
		"softdep foo pre: bar\n" +
		"#options vfio-pci ids=5:6\n" +
		"blacklist nouveau\n" +
		"options\n"
	var got []string
	for _, l := range ParseModprobeConf("/etc/modprobe.d/x.conf", []byte(in)) {
		got = append(got, fmt.Sprintf("%d %s %s %v", l.Line, l.Command, l.Module, l.Args))
	}
	want := []string{"2 options vfio-pci [ids=10de:2330 disable_vga=1]", "4 options vfio_pci [ids=1:2]", "5 options vfio-pci [ids=3:4]",
		"7 softdep nouveau [pre: vfio-pci]", "8 softdep snd_hda_intel [pre: vfio_pci post: x]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseModulesBuiltin(t *testing.T) {
	got := ParseModulesBuiltin([]byte("kernel/drivers/vfio/vfio.ko\nkernel/drivers/vfio/pci/vfio-pci-core.ko\n\nnot a module\nkernel/x/.ko\n"))
	if diff := cmp.Diff(map[string]bool{"vfio": true, "vfio_pci_core": true}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParsePCIIDs(f *testing.F) {
	for _, s := range []string{"10de:2330,10de:22ba", "0x8086:0x1234:ffffffff:ffffffff:030000:ff0000", ",,,", ":", "ffffffffff:1"} {
		f.Add(s)
	}
	d := &pci.Device{Present: pci.HasVendor | pci.HasDevice | pci.HasClass | pci.HasSubsystem, Vendor: 0x10de, Device: 0x2330, Class: 0x030200}
	f.Fuzz(func(t *testing.T, s string) {
		ids, errs := ParsePCIIDs(s)
		if len(ids)+len(errs) > strings.Count(s, ",")+2 {
			t.Fatalf("%d ids and %d errors from %d entries", len(ids), len(errs), strings.Count(s, ",")+1)
		}
		for _, id := range ids {
			id.Matches(d)
		}
	})
}

func FuzzParseModprobeConf(f *testing.F) {
	f.Add([]byte("options vfio-pci ids=10de:2330\nsoftdep nouveau pre: vfio-pci\n"))
	f.Add([]byte("options vfio-pci \\\n\\\n\\\n"))
	f.Add([]byte("softdep"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, l := range ParseModprobeConf("/f", b) {
			if l.Line < 1 || l.Command != "options" && l.Command != "softdep" {
				t.Fatalf("%+v", l)
			}
		}
		ParseModulesBuiltin(b)
	})
}

// The committed trees stay readable by the VFIO reader with no error
// beyond what a tree lacks.
func TestVFIOAllIOMMUTrees(t *testing.T) {
	for _, h := range fixture.IOMMUHosts() {
		root := hostfs.MustNew(filepath.Join(hostsDir, h.Name))
		inv, err := pci.Scan(root)
		if err != nil {
			t.Fatal(err)
		}
		st := Read(root, inv)
		v := ReadVFIO(root, st, inv)
		if v.Container.Present != Yes || v.Container.DevMatches() != Yes {
			t.Errorf("%s: %s", h.Name, v.Container)
		}
		for _, g := range v.Groups {
			if g.Node.DevMatches() != Yes || g.Registered != Yes {
				t.Errorf("%s: group %s: %s", h.Name, g.Name, g.Node)
			}
		}
		for _, m := range v.Modules {
			if m.Err != nil || len(m.ParamErrs) > 0 {
				t.Errorf("%s: %s: %v %v", h.Name, m.Name, m.Err, m.ParamErrs)
			}
		}
		if len(v.ModprobeErrs) > 0 {
			t.Errorf("%s: %v", h.Name, v.ModprobeErrs)
		}
	}
}
