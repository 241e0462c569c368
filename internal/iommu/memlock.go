package iommu

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// Locked memory for VFIO. Mapping memory for a device's DMA pins it:
// vfio_iommu_type1 charges every pinned RAM page to the mapping process's
// mm->locked_vm and refuses past its soft RLIMIT_MEMLOCK with ENOMEM
// (drivers/vfio/vfio_iommu_type1.c, vfio_pin_pages_remote: "!dma->lock_cap
// && mm->locked_vm + lock_acct + 1 > limit"), unless the process had
// CAP_IPC_LOCK when it mapped (vfio_dma_do_map: dma->lock_cap =
// capable(CAP_IPC_LOCK), a check against the initial user namespace).
// iommufd charges the user's locked_vm, shared by all of that user's
// processes, against the task's RLIMIT_MEMLOCK (drivers/iommu/iommufd/
// pages.c, incr_user_locked_vm) and skips it with CAP_IPC_LOCK
// (iopt_alloc_pages); its /dev/vfio/vfio compatibility charges the mm as
// type1 does. A QEMU guest's whole memory is mapped (and so pinned) at
// start; the assigned devices' BARs are mapped too, for peer-to-peer DMA,
// but are not charged: their pages are MMIO, not RAM
// (is_invalid_reserved_pfn). Management layers budget for them all the
// same: libvirt sets the limit to the guest's memory plus 1 GiB
// (qemuDomainGetMemLockLimitBytes). So two numbers are stated: what the
// kernel will charge (the guest memory) and the budget (guest memory plus
// the memory BARs), against the soft limit.

// MemlockRequest names the process and what it maps.
type MemlockRequest struct {
	PID int
	// Devices are the functions it holds or will be given. Empty: those of
	// the VFIO groups and device cdevs it holds open.
	Devices []pci.Address
	// Guest is the guest (or DMA-mapped) memory in bytes as the user
	// gives it; nil: QEMU's -m from its live command line.
	Guest *uint64
}

// DeviceBARs are the memory BARs of one function.
type DeviceBARs struct {
	Address pci.Address
	BARs    []pci.Resource // memory BARs 0-5 the kernel assigned
	Bytes   uint64
	Err     error // the resource file could not be read; Bytes is 0
}

// Guest is the memory a process maps for DMA.
type Guest struct {
	Known bool
	Bytes uint64
	// From says where Bytes comes from: "given", or the -m option of the
	// command line, or QEMU's default.
	From string
	// Cmdline is how reading /proc/PID/cmdline went: ReadNotCaptured in
	// a replay, whose snapshot never holds a command line (hostfs keeps
	// none: arguments carry secrets), ReadNotRead when a size was given.
	Cmdline runtime.ProcRead
	Argv0   string
	QEMU    *QEMUMemory
	// Why says why Bytes is not known.
	Why string
}

// Memlock is what a process may lock against what VFIO will pin for it.
type Memlock struct {
	PID  int
	Comm string

	Status     runtime.ProcRead
	Limits     runtime.ProcRead
	UIDMap     runtime.ProcRead
	Limit      *runtime.RLimit // RLIMIT_MEMLOCK; nil when not read
	CapIPCLock Tri             // CAP_IPC_LOCK in CapEff
	// InitialUserNS: the process is in the initial user namespace (its
	// uid_map is the identity), where capable() finds its capabilities.
	InitialUserNS Tri
	// Exempt: CAP_IPC_LOCK in the initial user namespace; the limit does
	// not apply to VFIO's mappings.
	Exempt Tri
	// Locked is VmLck, the process's mm->locked_vm in bytes (mlock and
	// VFIO type1's pinning both count there); nil when not shown.
	Locked *uint64

	Guest Guest
	// Devices are the functions whose BARs count, and DevicesFrom where
	// they came from ("given", or the open group nodes).
	Devices     []DeviceBARs
	DevicesFrom []string
	// DevicesErr is why the held devices could not be told.
	DevicesErr error
	BARBytes   uint64
	BARsKnown  bool

	// Charged is what the kernel will charge: the guest memory. Need is
	// the budget: Charged plus the memory BARs. Each is valid when its
	// Known flag is set.
	Charged, Need           uint64
	ChargedKnown, NeedKnown bool
	// BelowCharged and BelowNeed compare the soft limit with them:
	// Unknown when a side is not known; an unlimited limit is never
	// below.
	BelowCharged, BelowNeed Tri

	// Floor is the least memory any use of VFIO by this process pins
	// (MemlockFloor), FloorWhy where the number comes from; BelowFloor
	// says whether the soft limit is under it, which no guest size
	// changes: Unknown only when the limit was not read.
	Floor      uint64
	FloorWhy   string
	BelowFloor Tri

	// Explain are evidence sentences: the numbers, and the errno a user
	// sees when the limit is short.
	Explain []string
}

// Read limits of the /proc files read here (the kernel writes a few KiB
// of status and limits; a command line is bounded by exec's limit on
// arguments and environment together, at most 6 MiB: fs/exec.c).
const (
	procSmallLimit   = 256 << 10
	procCmdlineLimit = 8 << 20
)

// ReadMemlock reads process req.PID's locked-memory limit, capabilities
// and what it maps. inv and v are the PCI inventory and VFIO state of the
// same root (v may be nil when req.Devices is given).
func ReadMemlock(root *hostfs.Root, inv *pci.Inventory, v *VFIO, req MemlockRequest) *Memlock {
	m := &Memlock{PID: req.PID}
	proc := fmt.Sprintf("/proc/%d", req.PID)

	b, r := readProc(root, proc+"/status", procSmallLimit)
	if r.OK() {
		st, err := runtime.ParseProcStatus(b)
		if err != nil {
			r = runtime.ProcRead{Path: r.Path, State: runtime.ReadMalformed, Err: fmt.Errorf("%s: %w", r.Path, err)}
		}
		// A status the kernel did not write that way decides nothing
		// about capabilities: a CapEff that did not parse reads as zero.
		m.Comm = st.Name
		if err == nil {
			m.CapIPCLock = No
			if st.CapEff.Has(unix.CAP_IPC_LOCK) {
				m.CapIPCLock = Yes
			}
		}
		if kb, ok := statusKB(b, "VmLck"); ok {
			bytes := kb << 10
			m.Locked = &bytes
		}
	}
	m.Status = r

	b, r = readProc(root, proc+"/limits", procSmallLimit)
	if r.OK() {
		l, err := runtime.ParseProcLimits(b)
		if ml, ok := l.MemLock(); ok {
			m.Limit = &ml
		} else if err == nil {
			err = fmt.Errorf("no %q row", runtime.MemLockName)
		}
		if err != nil {
			r = runtime.ProcRead{Path: r.Path, State: runtime.ReadMalformed, Err: fmt.Errorf("%s: %w", r.Path, err)}
		}
	}
	m.Limits = r

	b, r = readProc(root, proc+"/uid_map", procSmallLimit)
	if r.OK() {
		idm, err := runtime.ParseIDMap(b)
		switch {
		case err != nil:
			r = runtime.ProcRead{Path: r.Path, State: runtime.ReadMalformed, Err: fmt.Errorf("%s: %w", r.Path, err)}
		case idm.IsIdentity():
			m.InitialUserNS = Yes
		default:
			m.InitialUserNS = No
		}
	}
	m.UIDMap = r
	switch {
	case m.CapIPCLock == No || m.InitialUserNS == No:
		m.Exempt = No
	case m.CapIPCLock == Yes && m.InitialUserNS == Yes:
		m.Exempt = Yes
	}

	m.Guest = readGuest(root, req)
	m.readDevices(root, inv, v, req)
	m.Floor, m.FloorWhy = MemlockFloor(m.Guest.Argv0, m.comm(root), hostX86(root))
	m.compare()
	return m
}

// comm is the process's name: its status Name, else /proc/PID/comm.
func (m *Memlock) comm(root *hostfs.Root) string {
	if m.Comm != "" {
		return m.Comm
	}
	c, _ := root.ReadString(fmt.Sprintf("/proc/%d/comm", m.PID))
	return c
}

// hostX86 reports whether the firmware's tables say the host is an x86
// machine: a DMAR (Intel VT-d) or IVRS (AMD-Vi) table exists only there.
// false says only that neither table is listed.
func hostX86(root *hostfs.Root) bool {
	return root.Exists(path.Join(TablesDir, SigDMAR)) || root.Exists(path.Join(TablesDir, SigIVRS))
}

// The least a process pins through VFIO, whatever it maps.
//
// The kernel counts pinned memory in pages: vfio_pin_pages_remote
// (drivers/vfio/vfio_iommu_type1.c) refuses the page that would take
// mm->locked_vm past RLIMIT_MEMLOCK >> PAGE_SHIFT, so a soft limit under
// one page pins nothing at all, and no Linux architecture has pages under
// 4 KiB (x86's are 4 KiB; arm64 and ppc64 have 4, 16 or 64 KiB). Any VFIO
// user maps at least a page for its device's DMA.
//
// QEMU maps every RAM section of the guest's address space for DMA, the
// read-only ones too (hw/vfio/listener.c, vfio_listener_region_add, which
// skips only what is neither RAM nor an IOMMU region), and pins them at
// start. The guest's RAM is at least 8 KiB: machine_set_mem
// (hw/core/machine.c) rounds the size up to 8 KiB, and -m 0 gives the
// machine's default (system/vl.c, parse_memory_options). Every x86
// machine also maps its firmware as RAM: x86_bios_rom_init
// (hw/i386/x86-common.c) refuses a BIOS image that is not a positive
// multiple of 64 KiB and maps it as the RAM region "pc.bios" (microvm and
// the ISA pc always take this path); the PCI pc and q35 machines map
// either that or, with pflash firmware, the RAM copy "isa-bios" of its last
// 128 KiB, and always the 128 KiB RAM region "pc.rom" of option ROMs
// (hw/i386/pc.c, pc_memory_init; PC_ROM_SIZE). So an x86 QEMU pins at
// least 8 KiB + 64 KiB. The assigned devices' BARs are mapped too but
// not counted (MMIO pages are reserved pfns, is_invalid_reserved_pfn).
// libvirt, for its part, sets a VFIO guest's limit to the guest's memory
// plus 1 GiB (src/qemu/qemu_domain.c, qemuDomainGetMemLockLimitBytes), so
// a limit under 1 GiB was never set by libvirt for a VFIO guest.
const (
	MinPageSize             = 4 << 10
	QEMUMinRAM              = 8 << 10
	QEMUx86MinFirmware      = 64 << 10
	QEMUx86MinPinned        = QEMUMinRAM + QEMUx86MinFirmware
	LibvirtVFIOMemlockExtra = 1 << 30
)

// MemlockFloor is the least memory a process pins through VFIO, and why:
// QEMUx86MinPinned for a QEMU that runs x86 guests (qemu-system-x86_64
// or -i386 by name, or a KVM QEMU, qemu-kvm or kvm, on an x86 host),
// else one page. argv0 may be "" (not read); comm is the kernel's name
// for the process, at most 15 bytes ("qemu-system-x86").
func MemlockFloor(argv0, comm string, x86Host bool) (uint64, string) {
	var argv []string
	if argv0 != "" {
		argv = []string{argv0}
	}
	name := path.Base(argv0)
	if argv0 == "" {
		name = comm
	}
	if IsQEMU(argv, comm) {
		x86 := strings.HasPrefix(name, "qemu-system-x86") || strings.HasPrefix(name, "qemu-system-i38")
		kvm := name == "qemu-kvm" || name == "kvm"
		if x86 || kvm && x86Host {
			why := fmt.Sprintf("%s runs x86 guests", name)
			if !x86 {
				why = fmt.Sprintf("%s runs guests of this x86 host (it has a DMAR or IVRS table)", name)
			}
			return QEMUx86MinPinned, fmt.Sprintf("%s, and any x86 guest of QEMU pins at least %s: %s of RAM (QEMU rounds the size up to 8 KiB, hw/core/machine.c machine_set_mem) and %s of firmware mapped as RAM (a BIOS image is a positive multiple of 64 KiB, hw/i386/x86-common.c x86_bios_rom_init; the pc and q35 machines add the 128 KiB pc.rom, hw/i386/pc.c), all mapped for DMA (hw/vfio/listener.c, vfio_listener_region_add)",
				why, humanBytes(QEMUx86MinPinned), humanBytes(QEMUMinRAM), humanBytes(QEMUx86MinFirmware))
		}
	}
	return MinPageSize, fmt.Sprintf("any use of VFIO pins at least one page, and no Linux page is smaller than %s (drivers/vfio/vfio_iommu_type1.c, vfio_pin_pages_remote counts the limit in pages)", humanBytes(MinPageSize))
}

// readProc reads a /proc file and classifies the outcome as the runtime
// package's readers do.
func readProc(root *hostfs.Root, p string, limit int64) ([]byte, runtime.ProcRead) {
	b, err := root.ReadFileLimit(p, limit)
	return b, procRead(root, p, err)
}

func procRead(root *hostfs.Root, p string, err error) runtime.ProcRead {
	r := runtime.ProcRead{Path: p, Err: err}
	switch {
	case err == nil:
		r.State = runtime.ReadOK
	case errors.Is(err, unix.ESRCH):
		r.State = runtime.ReadGone
	case errors.Is(err, fs.ErrNotExist):
		switch {
		case !root.LiveProc() && !root.Covers(p):
			r.State = runtime.ReadNotCaptured
		case !root.Exists(path.Dir(p)):
			r.State = runtime.ReadGone
		default:
			r.State = runtime.ReadAbsent
		}
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		r.State = runtime.ReadUnreadable
	case errors.Is(err, hostfs.ErrTooLarge):
		r.State = runtime.ReadMalformed
	default:
		r.State = runtime.ReadUnreadable
	}
	return r
}

// statusKB reads a "Key:   N kB" line of /proc/PID/status
// (fs/proc/task_mmu.c, task_mem).
func statusKB(b []byte, key string) (uint64, bool) {
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(k) != key {
			continue
		}
		f := strings.Fields(string(v))
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || n > 1<<53 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

func readGuest(root *hostfs.Root, req MemlockRequest) Guest {
	if req.Guest != nil {
		return Guest{Known: true, Bytes: *req.Guest, From: "given"}
	}
	g := Guest{}
	p := fmt.Sprintf("/proc/%d/cmdline", req.PID)
	if !root.LiveProc() {
		g.Cmdline = runtime.ProcRead{Path: p, State: runtime.ReadNotCaptured,
			Err: errors.New("a command line is read live only: snapshots never hold /proc/PID/cmdline")}
		g.Why = "the command line is not captured; give the guest size"
		return g
	}
	b, r := readProc(root, p, procCmdlineLimit)
	g.Cmdline = r
	if !r.OK() {
		g.Why = "the command line could not be read: " + r.String()
		return g
	}
	argv := ParseProcCmdline(b)
	if len(argv) > 0 {
		g.Argv0 = argv[0]
	}
	comm, _ := root.ReadString(fmt.Sprintf("/proc/%d/comm", req.PID))
	if !IsQEMU(argv, comm) {
		g.Why = fmt.Sprintf("PID %d is not QEMU (argv[0] %q): the memory it maps for DMA (a DPDK application's hugepages) is not read from its command line; give the size", req.PID, short(g.Argv0))
		return g
	}
	q, err := ParseQEMUMemory(argv)
	if err != nil {
		g.Why = "QEMU's -m does not parse: " + err.Error()
		return g
	}
	g.QEMU, g.Known, g.Bytes = &q, true, q.Size
	switch {
	case q.Default:
		g.From = "no -m on the command line: QEMU's default machine memory (128 MiB, hw/core/machine.c; a machine type may change it)"
	default:
		g.From = "-m " + strings.Join(q.Args, " -m ") + " on " + p
		if q.MaxMem > 0 {
			g.From += fmt.Sprintf(" (maxmem %s: hot-plugged memory is mapped and pinned too)", humanBytes(q.MaxMem))
		}
	}
	return g
}

func (m *Memlock) readDevices(root *hostfs.Root, inv *pci.Inventory, v *VFIO, req MemlockRequest) {
	addrs := req.Devices
	if len(addrs) > 0 {
		m.DevicesFrom = []string{"given"}
	} else {
		if v == nil {
			m.DevicesErr = errors.New("no devices given and no VFIO state to find those it holds")
			return
		}
		budget := maxFDLinks
		holders, _, err := readFDs(root, req.PID, v.GroupTargets(), &budget)
		if err != nil {
			m.DevicesErr = fmt.Errorf("the devices it holds could not be told: %w", err)
			return
		}
		seen := map[pci.Address]bool{}
		for _, h := range holders {
			var got []pci.Address
			switch dir, name := path.Split(h.Matched); {
			case dir == VFIODevDir+"/":
				if g := v.GroupNode(name); g != nil {
					got = g.Members
				}
			case dir == VFIODevicesDir+"/":
				for _, b := range v.Bindings {
					if b.CDev != nil && b.CDev.Name == name {
						got = append(got, b.Address)
					}
				}
			}
			if len(got) == 0 {
				continue
			}
			m.DevicesFrom = append(m.DevicesFrom, h.String())
			for _, a := range got {
				if !seen[a] {
					seen[a] = true
					addrs = append(addrs, a)
				}
			}
		}
	}
	m.BARsKnown = true
	for _, a := range addrs {
		db := DeviceBARs{Address: a}
		var d *pci.Device
		if inv != nil {
			d = inv.Lookup(a)
		}
		if d == nil {
			db.Err = fmt.Errorf("%s is not among the PCI functions read", a)
		} else {
			db.BARs, db.Bytes, db.Err = MemoryBARs(root, d)
		}
		if db.Err != nil {
			m.BARsKnown = false
		}
		m.BARBytes += db.Bytes
		m.Devices = append(m.Devices, db)
	}
}

// MemoryBARs returns d's memory BARs (resources 0-5 the kernel flags as
// memory and assigned, from the `resource` file: sizes come only from
// there, pci.Regions takes them from it too) and their sum. The
// expansion ROM and a PF's SR-IOV VF BARs are left out: QEMU copies the
// ROM instead of mapping it, and does not map a PF's VF space.
func MemoryBARs(root *hostfs.Root, d *pci.Device) ([]pci.Resource, uint64, error) {
	res, err := pci.ReadResources(root, d)
	if err != nil {
		return nil, 0, err
	}
	var out []pci.Resource
	var sum uint64
	for _, r := range res {
		if r.Index >= pci.IndexROM {
			break
		}
		if r.Flags&pci.ResourceMem == 0 || r.Flags&(pci.ResourceUnset|pci.ResourceDisabled) != 0 || r.Size() == 0 {
			continue
		}
		out = append(out, r)
		sum += r.Size()
	}
	return out, sum, nil
}

func (m *Memlock) compare() {
	if m.Guest.Known {
		m.Charged, m.ChargedKnown = m.Guest.Bytes, true
		if m.BARsKnown {
			m.Need, m.NeedKnown = m.Guest.Bytes+m.BARBytes, true
		}
	}
	below := func(n uint64, known bool) Tri {
		switch {
		case m.Limit == nil || !known:
			return Unknown
		case m.Limit.Soft != runtime.RLimInfinity && m.Limit.Soft < n:
			return Yes
		}
		return No
	}
	m.BelowCharged = below(m.Charged, m.ChargedKnown)
	m.BelowNeed = below(m.Need, m.NeedKnown)
	m.BelowFloor = below(m.Floor, m.Floor > 0)
	m.explain()
}

func (m *Memlock) explain() {
	add := func(format string, args ...any) { m.Explain = append(m.Explain, fmt.Sprintf(format, args...)) }
	who := fmt.Sprintf("PID %d", m.PID)
	if m.Comm != "" {
		who += " (" + m.Comm + ")"
	}
	if m.Limit != nil {
		add("%s: RLIMIT_MEMLOCK %s (%s); VFIO checks the soft limit", who, limitString(*m.Limit), m.Limits.Path)
	} else {
		add("%s: RLIMIT_MEMLOCK not known: %s", who, m.Limits)
	}
	if m.Locked != nil {
		add("%s has %s locked already (VmLck: mlock and VFIO type1's pinned pages count there)", who, humanBytes(*m.Locked))
	}
	if m.Guest.Known {
		add("guest memory %s: %s", humanBytes(m.Guest.Bytes), m.Guest.From)
	} else {
		add("guest memory not known: %s", m.Guest.Why)
	}
	for _, d := range m.Devices {
		if d.Err != nil {
			add("memory BARs of %s not known: %v", d.Address, d.Err)
			continue
		}
		var parts []string
		for _, r := range d.BARs {
			s := fmt.Sprintf("BAR%d %s", r.Index, humanBytes(r.Size()))
			var fl []string
			if r.Flags&pci.ResourceMem64 != 0 {
				fl = append(fl, "64-bit")
			}
			if r.Flags&pci.ResourcePrefetch != 0 {
				fl = append(fl, "prefetchable")
			}
			if len(fl) > 0 {
				s += " (" + strings.Join(fl, ", ") + ")"
			}
			parts = append(parts, s)
		}
		add("memory BARs of %s: %s = %s", d.Address, strings.Join(parts, ", "), humanBytes(d.Bytes))
	}
	if m.DevicesErr != nil {
		add("%v", m.DevicesErr)
	} else if len(m.Devices) == 0 {
		add("%s holds no VFIO group or device open and none was given: no BARs counted", who)
	}
	if m.NeedKnown {
		add("the kernel will charge the guest memory, %s; the budget with the BARs is %s: BARs are mapped for peer-to-peer DMA but not charged, being MMIO rather than RAM (vfio_pin_pages_remote skips them), and libvirt budgets 1 GiB over the guest memory for them (qemuDomainGetMemLockLimitBytes)",
			humanBytes(m.Charged), humanBytes(m.Need))
	}
	switch {
	case m.Exempt == Yes:
		add("%s has CAP_IPC_LOCK in the initial user namespace: VFIO type1 (vfio_dma_do_map: dma->lock_cap = capable(CAP_IPC_LOCK)) and iommufd (iopt_alloc_pages) do not apply the limit to it", who)
	case m.CapIPCLock == Yes && m.InitialUserNS == No:
		add("%s has CAP_IPC_LOCK only in a user namespace of its own: capable() asks the initial user namespace, so the limit applies", who)
	case m.CapIPCLock == No:
		add("%s lacks CAP_IPC_LOCK (CapEff, %s): the limit applies", who, m.Status.Path)
	default:
		add("whether %s has CAP_IPC_LOCK in the initial user namespace is not known (%s; %s)", who, m.Status, m.UIDMap)
	}
	if m.BelowFloor == Yes && m.Exempt != Yes {
		add("the soft limit %s is below %s, the least this process pins through VFIO: %s; so VFIO_IOMMU_MAP_DMA fails with ENOMEM whatever the guest's size",
			humanBytes(m.Limit.Soft), humanBytes(m.Floor), m.FloorWhy)
		if m.Limit.Soft < LibvirtVFIOMemlockExtra {
			add("libvirt sets a VFIO guest's limit to its memory plus 1 GiB (qemuDomainGetMemLockLimitBytes): a limit of %s was not set by libvirt for such a guest", humanBytes(m.Limit.Soft))
		}
	}
	if m.BelowCharged == Yes && m.Exempt != Yes {
		add("the soft limit %s is below the guest memory %s: VFIO_IOMMU_MAP_DMA pins each page of it and charges it to the process's locked memory, and past the limit fails with ENOMEM; the kernel logs \"vfio_pin_pages_remote: RLIMIT_MEMLOCK (%d) exceeded\" and QEMU \"VFIO_MAP_DMA failed: Cannot allocate memory\" (drivers/vfio/vfio_iommu_type1.c; iommufd's IOMMU_IOAS_MAP gives ENOMEM the same way, drivers/iommu/iommufd/pages.c incr_user_locked_vm)",
			humanBytes(m.Limit.Soft), humanBytes(m.Charged), m.Limit.Soft)
	} else if m.BelowNeed == Yes && m.Exempt != Yes {
		add("the soft limit %s covers the guest memory %s but not the budget %s with the BARs: the kernel does not charge the BARs, so mapping succeeds unless something else the process locks (VmLck) takes the rest",
			humanBytes(m.Limit.Soft), humanBytes(m.Charged), humanBytes(m.Need))
	}
}

func limitString(l runtime.RLimit) string {
	f := func(v uint64) string {
		if v == runtime.RLimInfinity {
			return "unlimited"
		}
		return humanBytes(v)
	}
	return "soft " + f(l.Soft) + ", hard " + f(l.Hard)
}

// HumanBytes is humanBytes for the findings that quote these numbers.
func HumanBytes(n uint64) string { return humanBytes(n) }

// humanBytes is n exactly, in the largest binary unit that divides it,
// with a rounded form in a larger unit when the exact number runs past
// 1023: "64 GiB", "8 MiB", "1000 B", "65584 MiB (64.05 GiB)".
func humanBytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u, v := 0, n
	for u < len(units)-1 && v >= 1024 && v%1024 == 0 {
		v /= 1024
		u++
	}
	s := fmt.Sprintf("%d %s", v, units[u])
	if v < 1024 || u == len(units)-1 {
		return s
	}
	f, r := float64(v), u
	for r < len(units)-1 && f >= 1024 {
		f /= 1024
		r++
	}
	return fmt.Sprintf("%s (%.2f %s)", s, f, units[r])
}

// ParseProcCmdline splits /proc/PID/cmdline into its arguments
// (NUL-terminated strings, fs/proc/base.c get_mm_cmdline), at most
// maxArgs of them.
func ParseProcCmdline(b []byte) []string {
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil
	}
	var out []string
	for a := range bytes.SplitSeq(b, []byte{0}) {
		if len(out) >= maxArgs {
			break
		}
		out = append(out, string(a))
	}
	return out
}

// maxArgs bounds the arguments scanned.
const maxArgs = 1 << 16

// IsQEMU reports whether argv (or, when argv is empty, comm) is a QEMU
// system emulator: qemu-system-ARCH, or the distributions' qemu-kvm
// (RHEL's /usr/libexec/qemu-kvm, which KubeVirt's launcher runs) and
// kvm.
func IsQEMU(argv []string, comm string) bool {
	name := comm
	if len(argv) > 0 && argv[0] != "" {
		name = path.Base(argv[0])
	}
	return strings.HasPrefix(name, "qemu-system-") || name == "qemu-kvm" || name == "kvm"
}

// QEMUMemory is what QEMU's -m options say (system/vl.c,
// parse_memory_options; qemu-options.hx: -m [size=]megs[,slots=n,maxmem=size]).
type QEMUMemory struct {
	// Args are the -m values as given, in order.
	Args []string
	// Size is the guest's initial memory in bytes as QEMU computes it
	// (rounded up to 8 KiB).
	Size uint64
	// Default: no -m gave a size, and Size is the default machine memory
	// (128 MiB: hw/core/machine.c, default_ram_size).
	Default bool
	Slots   uint64
	MaxMem  uint64 // 0 when not given
}

// QEMUDefaultRAM is the default_ram_size machines inherit.
const QEMUDefaultRAM = 128 << 20

// ParseQEMUMemory reads the -m options of a QEMU command line. QEMU
// accepts -m and --m, each taking the next argument; the options merge,
// a later key replacing an earlier one (the "memory" option list has
// merge_lists). A value is QemuOpts syntax: comma-separated key=value,
// ",," for a comma, the first element without "=" being the size. Sizes
// are qemu_strtosz's; a size whose last character is a digit is in MiB
// (the legacy suffix-less form: -m 16384, -m size=16384).
//
// QEMU's option table is not modelled: a value of another option that is
// exactly "-m" would be misread, which no QEMU front end produces.
func ParseQEMUMemory(argv []string) (QEMUMemory, error) {
	var q QEMUMemory
	var size, maxmem, slots string
	haveSize := false
	for i := 1; i < len(argv) && i < maxArgs; i++ {
		a := argv[i]
		if a != "-m" && a != "--m" {
			continue
		}
		if i+1 >= len(argv) {
			return q, fmt.Errorf("%s: no value", a)
		}
		i++
		v := argv[i]
		q.Args = append(q.Args, v)
		kv, err := parseQemuOpts(v, "size")
		if err != nil {
			return q, fmt.Errorf("-m %s: %w", short(v), err)
		}
		for _, p := range kv {
			switch p[0] {
			case "size":
				size, haveSize = p[1], true
			case "maxmem":
				maxmem = p[1]
			case "slots":
				slots = p[1]
			default:
				return q, fmt.Errorf("-m %s: invalid parameter %q", short(v), short(p[0]))
			}
		}
	}
	if !haveSize {
		q.Size, q.Default = QEMUDefaultRAM, true
	} else {
		if size == "" {
			return q, errors.New("missing 'size' option value")
		}
		sz, err := ParseQEMUSize(size)
		if err != nil {
			return q, fmt.Errorf("size %s: %w", short(size), err)
		}
		if last := size[len(size)-1]; '0' <= last && last <= '9' {
			if sz > ^uint64(0)/(1<<20) {
				return q, fmt.Errorf("size %s: ram size too large", short(size))
			}
			sz <<= 20
		}
		// QEMU_ALIGN_UP(sz, 8192); a size that wraps is "ram size too large".
		if sz > ^uint64(0)-8191 {
			return q, fmt.Errorf("size %s: ram size too large", short(size))
		}
		sz = (sz + 8191) &^ 8191
		if sz == 0 {
			return q, fmt.Errorf("size %s: zero", short(size))
		}
		q.Size = sz
	}
	if maxmem != "" {
		n, err := ParseQEMUSize(maxmem)
		if err != nil {
			return q, fmt.Errorf("maxmem %s: %w", short(maxmem), err)
		}
		q.MaxMem = n
	}
	if slots != "" {
		// QEMU_OPT_NUMBER: qemu_strtou64 with base 0.
		n, err := strconv.ParseUint(slots, 0, 64)
		if err != nil {
			return q, fmt.Errorf("slots %s: not a number", short(slots))
		}
		q.Slots = n
	}
	return q, nil
}

// parseQemuOpts splits a QemuOpts string into key/value pairs
// (util/qemu-option.c, opts_do_parse and get_opt_value): elements are
// separated by ',' (",," is a literal comma), and the first element
// without '=' is the implied key's value.
func parseQemuOpts(s, implied string) ([][2]string, error) {
	var out [][2]string
	first := true
	for len(s) > 0 {
		if len(out) >= 64 {
			return out, errors.New("too many parameters")
		}
		// get_opt_value: up to the first single comma.
		var elem strings.Builder
		i := 0
		for i < len(s) {
			if s[i] == ',' {
				if i+1 < len(s) && s[i+1] == ',' {
					elem.WriteByte(',')
					i += 2
					continue
				}
				break
			}
			elem.WriteByte(s[i])
			i++
		}
		e := elem.String()
		if i < len(s) {
			i++ // the separating comma
		}
		s = s[i:]
		k, v, hasEq := strings.Cut(e, "=")
		switch {
		case first && !hasEq && implied != "":
			out = append(out, [2]string{implied, e})
		case !hasEq:
			// QemuOpts reads "key" as key=on, and "nokey" as key=off: no
			// memory parameter is a boolean.
			return out, fmt.Errorf("parameter %q needs a value", short(e))
		case k == "":
			return out, errors.New("a parameter without a name")
		default:
			out = append(out, [2]string{k, v})
		}
		first = false
	}
	return out, nil
}

// ParseQEMUSize parses a size as QEMU's qemu_strtosz does
// (util/cutils.c, do_strtosz with the default unit 'B' and 1024 steps):
// a decimal number, with an optional fraction that needs a unit above
// bytes, or a 0x hex integer (deprecated by QEMU); then an optional
// suffix B, K, M, G, T, P or E in either case. No white space or other
// trailing bytes; nothing at or above 2^64.
func ParseQEMUSize(s string) (uint64, error) {
	if len(s) > 128 {
		return 0, errors.New("longer than any size")
	}
	if s == "" {
		return 0, errors.New("empty")
	}
	if s[0] == '-' {
		return 0, errors.New("negative")
	}
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a number", short(s))
	}
	val, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return 0, errors.New("too large")
	}
	var frac *big.Rat
	hex := false
	switch {
	case val == 0 && i == 1 && i < len(s) && (s[i] == 'x' || s[i] == 'X'):
		j := i + 1
		for j < len(s) && isHex(s[j]) {
			j++
		}
		if j == i+1 {
			return 0, fmt.Errorf("%q: no hex digits", short(s))
		}
		v, err := strconv.ParseUint(s[i+1:j], 16, 64)
		if err != nil {
			return 0, errors.New("too large")
		}
		val, i, hex = v, j, true
	case i < len(s) && s[i] == '.':
		j := i + 1
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		if j < len(s) && (s[j] == 'e' || s[j] == 'E') && j+1 < len(s) && (s[j+1] == '+' || s[j+1] == '-' || '0' <= s[j+1] && s[j+1] <= '9') {
			return 0, errors.New("an exponent is not accepted")
		}
		if digits := s[i+1 : j]; digits != "" && strings.Trim(digits, "0") != "" {
			frac, _ = new(big.Rat).SetString("0." + digits)
		}
		i = j
	}
	if hex && i < len(s) && s[i] == '.' {
		return 0, errors.New("a hex number takes no fraction")
	}
	mul := uint64(1)
	if i < len(s) {
		shift := strings.IndexByte("BKMGTPE", upper(s[i]))
		if shift < 0 {
			return 0, fmt.Errorf("%q: unknown suffix", short(s[i:]))
		}
		mul = 1 << (10 * shift)
		i++
	}
	if i != len(s) {
		return 0, fmt.Errorf("%q: trailing characters", short(s[i:]))
	}
	if frac != nil && mul == 1 {
		return 0, errors.New("a fraction needs a unit above bytes (1.5G)")
	}
	if val > ^uint64(0)/mul {
		return 0, errors.New("too large")
	}
	n := val * mul
	if frac != nil {
		// floor(frac * mul): what QEMU adds for the fraction.
		f := new(big.Int).Div(new(big.Int).Mul(frac.Num(), new(big.Int).SetUint64(mul)), frac.Denom())
		if !f.IsUint64() || f.Uint64() > ^uint64(0)-n {
			return 0, errors.New("too large")
		}
		n += f.Uint64()
	}
	return n, nil
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}
