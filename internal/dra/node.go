package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
)

// Options tune Read.
type Options struct {
	// KubeletDir is the kubelet's --root-dir as a host path;
	// kubelet.DefaultKubeletDir when empty.
	KubeletDir string
	// CDIDirs are the CDI spec directories the runtime reads, in priority
	// order; cdi.DefaultSpecDirs (/etc/cdi, /var/run/cdi) when nil.
	CDIDirs []string
	// Timeout bounds each socket's connect and call; one second when zero.
	Timeout time.Duration
	// RPC makes the GetInfo calls (internal/kubeletrpc); without one,
	// every call is NotDialed.
	RPC rpc.Caller
	// DevicePluginCheckpoint is the device manager's checkpoint as
	// internal/kubelet parsed it (kubelet.Node.Checkpoint), for double
	// advertising. When nil, Read parses the file itself; on a snapshot,
	// which never archives that file, only a caller's copy (from the
	// kubelet package's capture) can tell.
	DevicePluginCheckpoint *kubelet.Checkpoint
	// DevicePluginCheckpointFrom, when set and DevicePluginCheckpoint is
	// nil, gives it: Read calls it once, last, after the sockets' calls
	// and the state's read, so that the caller's read of the checkpoint
	// (the kubelet layer's, with its own calls on the sockets) can run
	// beside this one. A nil answer is as if it were not set.
	DevicePluginCheckpointFrom func() *kubelet.Checkpoint
}

// Resolve says whether a claim's CDI device ID resolves.
type Resolve string

const (
	Resolved   Resolve = "resolved"
	Unresolved Resolve = "unresolved" // no valid spec in the directories declares it
	Invalid    Resolve = "invalid"    // not a qualified CDI name
	// ResolveUnknown: a spec directory could not be listed or was not
	// captured: whether the name resolves is not known.
	ResolveUnknown Resolve = "unknown"
)

// CDIDevice is one CDI device ID of a prepared claim, resolved.
type CDIDevice struct {
	ID        string  `json:"id"`
	Driver    string  `json:"driver"`
	Claim     string  `json:"claim"` // NAMESPACE/NAME
	ClaimUID  string  `json:"claim_uid"`
	Device    string  `json:"device"` // POOL/DEVICE
	Resolve   Resolve `json:"resolve"`
	Spec      string  `json:"spec,omitempty"` // the spec file that declares it
	Evidence  string  `json:"evidence,omitempty"`
	UnsureWhy string  `json:"unsure_why,omitempty"`
	// UnsureErr is, for ResolveUnknown, the spec directory's problem
	// (cdi.Dir.Problem): what the fix follows from.
	UnsureErr error `json:"-"`
	// Rejected, for an unresolved ID: a spec file that declares it and
	// that the CDI library refuses to load ("PATH: ERROR"), the cause
	// then (an empty device edits, a bad cdiVersion), not a missing spec.
	Rejected string `json:"rejected,omitempty"`
}

// Node is what the node's DRA directories, sockets and state show. Every
// fact carries the path it came from; nothing here judges.
type Node struct {
	KubeletDir string `json:"kubelet_dir"`

	RegistryDir   string          `json:"registry_dir"`
	RegistryState kubelet.State   `json:"registry_state"`
	RegistryErr   string          `json:"registry_error,omitempty"`
	Registrations []*Registration `json:"registrations,omitempty"`

	// KubeletStart is the mtime of the socket the running kubelet bound
	// when it started (KubeletStartFrom: device-plugins/kubelet.sock, or
	// pod-resources/kubelet.sock); zero when neither is there.
	KubeletStart     time.Time `json:"kubelet_start,omitzero"`
	KubeletStartFrom string    `json:"kubelet_start_from,omitempty"`

	PluginsDir   string        `json:"plugins_dir"`
	PluginsState kubelet.State `json:"plugins_state"`
	PluginsErr   string        `json:"plugins_error,omitempty"`
	DriverDirs   []*DriverDir  `json:"driver_dirs,omitempty"`

	StatePath  string        `json:"state_path"`
	StateState kubelet.State `json:"state_state"`
	StateErr   string        `json:"state_error,omitempty"`
	State      *State        `json:"state,omitempty"`
	// StateMalformed: the file was read and does not parse (the kubelet
	// fails on it too); otherwise an Unreadable state is one this reader
	// could not read (permission, not a regular file, too large), which
	// says nothing of the kubelet's own read.
	StateMalformed bool `json:"state_malformed,omitempty"`
	// StateModTime is when the kubelet last wrote the state; BootTime the
	// running kernel's boot (btime in /proc/stat). The state has no boot
	// ID; WrittenBeforeBoot (mtime before the boot) is the evidence that
	// the claims it lists were prepared in an earlier boot, whose
	// /var/run/cdi (a tmpfs) is gone.
	StateModTime      time.Time `json:"state_mtime,omitzero"`
	BootTime          time.Time `json:"boot_time,omitzero"`
	WrittenBeforeBoot bool      `json:"written_before_boot,omitempty"`

	// CDIDirs are the spec directories read; CDI every CDI device ID of
	// every prepared claim, resolved against them.
	CDIDirs []string    `json:"cdi_dirs"`
	CDI     []CDIDevice `json:"cdi,omitempty"`

	// Double lists devices advertised both by a device plugin and by a
	// DRA driver; DoubleNotRun says why that could not be looked at.
	Double       []DoubleAdvert `json:"double,omitempty"`
	DoubleNotRun string         `json:"double_not_run,omitempty"`
	// DoubleErr is what DoubleNotRun says, typed (a read error of the
	// checkpoint, hostfs.NotCapturedError, a parse error with its path,
	// a CDI spec directory's problem).
	DoubleErr error `json:"-"`

	// RuntimeCDI is the CRI runtimes' CDI support, read when the node
	// has a DRA driver (ActiveDrivers); nil otherwise.
	RuntimeCDI *RuntimeCDI `json:"runtime_cdi,omitempty"`

	// Replayed: the socket answers come from a snapshot.
	Replayed bool `json:"-"`
}

// RegistryDir is the plugin registration directory under a kubelet root
// (kubeletplugin.KubeletRegistryDir).
func RegistryDir(kubeletDir string) string { return path.Join(kubeletDir, "plugins_registry") }

// PluginsDir is the plugins' data directory under a kubelet root
// (kubeletplugin.KubeletPluginsDir).
func PluginsDir(kubeletDir string) string { return path.Join(kubeletDir, "plugins") }

// ProcStat holds the kernel's boot time (fs/proc/stat.c, "btime").
const ProcStat = "/proc/stat"

func captureName(kdir string) string { return path.Join("dra", path.Clean("/"+kdir), "sockets.json") }

const captureFormat = 1

// capture is what cannot be archived: what the sockets answered.
type capture struct {
	Format           int             `json:"format"`
	RegistryState    kubelet.State   `json:"registry_state"`
	RegistryErr      string          `json:"registry_error,omitempty"`
	Registrations    []*Registration `json:"registrations,omitempty"`
	PluginsState     kubelet.State   `json:"plugins_state"`
	PluginsErr       string          `json:"plugins_error,omitempty"`
	DriverDirs       []*DriverDir    `json:"driver_dirs,omitempty"`
	KubeletStart     time.Time       `json:"kubelet_start,omitzero"`
	KubeletStartFrom string          `json:"kubelet_start_from,omitempty"`
}

// Read reads the node's DRA state through root. On a snapshot it replays
// what the sockets answered when it was taken; on a host it dials each
// socket once: GetInfo on registration sockets, a bare connect on
// endpoints and driver sockets. The state file and the CDI specs are read
// as files in both cases. Read fails only when it could look at nothing;
// every partial failure is a fact in Node.
func Read(ctx context.Context, root *hostfs.Root, opts Options) (*Node, error) {
	kdir := opts.KubeletDir
	if kdir == "" {
		kdir = kubelet.DefaultKubeletDir
	}
	if !strings.HasPrefix(kdir, "/") {
		return nil, fmt.Errorf("kubelet dir %q: %w", kdir, kubelet.ErrKubeletDir)
	}
	kdir = path.Clean(kdir)
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	caller := opts.RPC
	if caller == nil {
		caller = rpc.NoCaller
	}
	n := &Node{KubeletDir: kdir, RegistryDir: RegistryDir(kdir), PluginsDir: PluginsDir(kdir),
		StatePath: path.Join(kdir, StateName)}
	n.CDIDirs = opts.CDIDirs

	var wg sync.WaitGroup
	if b, ok := root.Captured(captureName(kdir)); ok {
		if err := n.replay(b); err != nil {
			return nil, fmt.Errorf("%s: captured DRA sockets: %w", kdir, err)
		}
	} else if _, ok := root.ReadSnapshotMeta(); ok {
		why := "this snapshot holds no record of the DRA registration and driver sockets"
		n.RegistryState, n.RegistryErr = kubelet.NotCaptured, why
		n.PluginsState, n.PluginsErr = kubelet.NotCaptured, why
		n.Replayed = true
	} else {
		wg.Add(2)
		go func() {
			defer wg.Done()
			regs, err := readRegistry(ctx, root, n.RegistryDir, caller, timeout)
			n.RegistryState, n.RegistryErr = stateOf(root, n.RegistryDir, kdir, err)
			n.Registrations = regs
		}()
		go func() {
			defer wg.Done()
			dirs, err := readDriverDirs(ctx, root, n.PluginsDir, timeout)
			n.PluginsState, n.PluginsErr = stateOf(root, n.PluginsDir, kdir, err)
			n.DriverDirs = dirs
		}()
		n.readKubeletStart(root)
	}
	n.readState(root, kdir)
	wg.Wait()
	if !n.Replayed {
		n.markOlder()
		if root.Recording() { // the JSON is only for a snapshot being taken
			root.Capture(captureName(kdir), n.marshalCapture())
		}
	}
	linkDirs(n.DriverDirs, n.Registrations, n.registrationsKnown())
	if len(n.Drivers()) == 0 {
		// No DRA driver on the node: no claim's devices to resolve,
		// none doubled, no runtime to judge under one; the CDI specs
		// and the runtimes are not read (this runs on every check).
		if n.CDIDirs == nil {
			n.CDIDirs = cdi.DefaultSpecDirs
		}
		return n, nil
	}
	// The spec directories the runtime reads: --cdi-spec-dirs, else the
	// first CDI-enabled runtime's configured ones, else the library's
	// defaults (as the container layer resolves them).
	rts, _ := cdi.FindRuntimes(root)
	if n.CDIDirs == nil {
		n.CDIDirs, _ = cdi.SpecDirs(rts)
	}
	reg := cdi.Load(root, n.CDIDirs)
	n.resolveCDI(reg)
	cp := opts.DevicePluginCheckpoint
	if cp == nil && opts.DevicePluginCheckpointFrom != nil {
		cp = opts.DevicePluginCheckpointFrom()
	}
	n.double(root, reg, kdir, cp)
	n.readRuntimeCDI(reg, rts)
	return n, nil
}

func (n *Node) readKubeletStart(root *hostfs.Root) {
	for _, p := range []string{
		path.Join(kubelet.DevicePluginDir(n.KubeletDir), kubelet.KubeletSocketName),
		kubelet.PodResourcesSocket(n.KubeletDir),
	} {
		if nd, err := root.Lstat(p); err != nil || nd.Type != hostfs.TypeSocket {
			continue
		}
		if m, err := root.ModTime(p); err == nil {
			n.KubeletStart, n.KubeletStartFrom = m, p
			return
		}
	}
}

func (n *Node) markOlder() {
	if n.KubeletStart.IsZero() {
		return
	}
	for _, r := range n.Registrations {
		r.OlderThanKubelet = !r.ModTime.IsZero() && r.ModTime.Before(n.KubeletStart)
	}
}

// readState reads and parses dra_manager_state, and the boot time it is
// compared with.
func (n *Node) readState(root *hostfs.Root, kdir string) {
	b, err := root.ReadFileLimit(n.StatePath, MaxStateSize)
	if errors.Is(err, hostfs.ErrTooLarge) {
		n.StateState, n.StateErr = kubelet.Unreadable, fmt.Sprintf("%v: larger than %d bytes: not a state the kubelet wrote", err, MaxStateSize)
		return
	}
	n.StateState, n.StateErr = stateOf(root, n.StatePath, kdir, err)
	if err != nil {
		return
	}
	st, err := ParseState(b)
	if err != nil {
		n.StateState, n.StateErr = kubelet.Unreadable, fmt.Sprintf("%s: %v", n.StatePath, err)
		n.StateMalformed = true
		return
	}
	n.State = st
	if m, err := root.ModTime(n.StatePath); err == nil {
		n.StateModTime = m
	}
	if b, err := root.ReadFileLimit(ProcStat, 1<<20); err == nil {
		if bt, ok := parseBtime(b); ok {
			n.BootTime = bt
		}
	}
	n.WrittenBeforeBoot = !n.StateModTime.IsZero() && !n.BootTime.IsZero() && n.StateModTime.Before(n.BootTime)
}

// parseBtime finds "btime SECONDS" in /proc/stat (fs/proc/stat.c,
// show_stat: the boot time in seconds since the epoch).
func parseBtime(b []byte) (time.Time, bool) {
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "btime" {
			s, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || s <= 0 {
				return time.Time{}, false
			}
			return time.Unix(s, 0), true
		}
	}
	return time.Time{}, false
}

// resolveCDI resolves every CDI device ID of every prepared claim as the
// runtime's CDI cache would (cdi.Registry.Resolve).
func (n *Node) resolveCDI(reg *cdi.Registry) {
	n.CDI = nil
	if n.State == nil {
		return
	}
	unsure := ""
	var unsureErr error
	for i := range reg.Dirs {
		d := &reg.Dirs[i]
		switch {
		case d.NotCaptured:
			unsure = fmt.Sprintf("%s: not captured", d.Path)
		case d.Err != nil && !d.Absent:
			unsure = fmt.Sprintf("%s: %v", d.Path, d.Err)
		}
		if unsure != "" {
			unsureErr = d.Problem()
			break
		}
	}
	for _, c := range n.State.Claims {
		for _, dc := range c.Drivers {
			for _, dv := range dc.Devices {
				for _, id := range dv.CDIDeviceIDs {
					cd := CDIDevice{ID: id, Driver: dc.Driver, Claim: c.Namespace + "/" + c.Name, ClaimUID: c.UID,
						Device: dv.Pool + "/" + dv.Device}
					res := reg.Resolve(id)
					switch {
					case res.Device != nil:
						cd.Resolve, cd.Spec = Resolved, res.Device.Spec.Path
					case !strings.HasPrefix(res.Err.Error(), "unresolvable"):
						cd.Resolve, cd.Evidence = Invalid, res.Err.Error()
					case unsure != "":
						cd.Resolve, cd.UnsureWhy, cd.UnsureErr = ResolveUnknown, unsure, unsureErr
					default:
						cd.Resolve, cd.Evidence = Unresolved, fmt.Sprintf("%v (spec directories %s)", res.Err, strings.Join(n.CDIDirs, ", "))
						cd.Rejected = rejectedSpec(reg, id)
					}
					n.CDI = append(n.CDI, cd)
				}
			}
		}
	}
}

// stateOf is kubelet.StateOf, with the component that gives a pod's
// /host the kubelet's directory named when a path was not given: so that
// "no DRA state" is not read as "none on the node".
func stateOf(root *hostfs.Root, p, top string, err error) (kubelet.State, string) {
	st, why := kubelet.StateOf(root, p, top, err)
	if st == kubelet.NotCaptured && why != "" {
		why += " (the agent's DaemonSet mounts it with the deploy/components/dra-state component)"
	}
	return st, why
}

func (n *Node) marshalCapture() []byte {
	b, err := json.Marshal(capture{Format: captureFormat, RegistryState: n.RegistryState, RegistryErr: n.RegistryErr,
		Registrations: n.Registrations, PluginsState: n.PluginsState, PluginsErr: n.PluginsErr, DriverDirs: n.DriverDirs,
		KubeletStart: n.KubeletStart, KubeletStartFrom: n.KubeletStartFrom})
	if err != nil {
		return nil
	}
	return b
}

// replay decodes a capture: untrusted bytes (someone else's snapshot).
func (n *Node) replay(b []byte) error {
	var c capture
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	if c.Format != captureFormat {
		return fmt.Errorf("capture format %d, want %d", c.Format, captureFormat)
	}
	if len(c.Registrations) > 1<<16 || len(c.DriverDirs) > 1<<16 {
		return errors.New("more entries than a directory listing holds")
	}
	for _, r := range c.Registrations {
		if r == nil {
			return errors.New("capture holds a null registration")
		}
	}
	for _, d := range c.DriverDirs {
		if d == nil {
			return errors.New("capture holds a null driver directory")
		}
	}
	n.RegistryState, n.RegistryErr, n.Registrations = c.RegistryState, c.RegistryErr, c.Registrations
	n.PluginsState, n.PluginsErr, n.DriverDirs = c.PluginsState, c.PluginsErr, c.DriverDirs
	n.KubeletStart, n.KubeletStartFrom = c.KubeletStart, c.KubeletStartFrom
	n.Replayed = true
	return nil
}

// Drivers are the DRA driver names the node shows: registrations of type
// DRAPlugin, driver directories, and the drivers of prepared claims.
func (n *Node) Drivers() []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, r := range n.Registrations {
		if r.Info != nil && r.Info.Type == TypeDRA {
			add(r.Info.Name)
		}
	}
	for _, d := range n.DriverDirs {
		if d.NotRegistered() || len(d.RegisteredBy) > 0 && n.isDRA(d) {
			add(d.Name)
		}
	}
	if n.State != nil {
		for _, c := range n.State.Claims {
			for _, dc := range c.Drivers {
				add(dc.Driver)
			}
		}
	}
	return out
}

func (n *Node) isDRA(d *DriverDir) bool {
	for _, r := range n.Registrations {
		if r.Info != nil && r.Info.Type == TypeDRA && r.names(d) {
			return true
		}
	}
	return false
}

// Registered reports whether a live, supported DRA registration names the
// driver.
func (n *Node) Registered(driver string) bool {
	for _, r := range n.Registrations {
		if r.Info != nil && r.Info.Type == TypeDRA && r.Info.Name == driver && r.Live() && !r.Unsupported {
			return true
		}
	}
	return false
}

// UnregisteredClaimDrivers are the drivers of prepared claims that no
// live registration names, sorted; nil when the registrations could not
// be read (then nothing is known).
func (n *Node) UnregisteredClaimDrivers() []string {
	if n.State == nil || !n.registrationsKnown() {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range n.State.Claims {
		for _, dc := range c.Drivers {
			if !seen[dc.Driver] && !n.Registered(dc.Driver) {
				seen[dc.Driver] = true
				out = append(out, dc.Driver)
			}
		}
	}
	sort.Strings(out)
	return out
}

// NoDeviceClaim is a driver's part of a claim in the kubelet's DRA state
// that holds no prepared device.
type NoDeviceClaim struct {
	Claim    string // namespace/name
	ClaimUID string
	Driver   string
	PodUIDs  []string
}

// NoDeviceClaims are the drivers' parts of the state's claims that hold no
// device, where the kubelet was to ask the driver to prepare them (no
// SkipNodeOperations of NodePrepareResources or "*"). The kubelet writes a
// claim to its state before it calls NodePrepareResources ("Checkpoint to
// ensure all claims we plan to prepare are tracked", PrepareResources in
// pkg/kubelet/cm/dra/manager.go), with a part per driver of the claim's
// allocation and no devices (computeDriverStates in claiminfo.go), and adds
// the devices the driver answers after (resetDevices, addDevice): a part
// with none is a prepare that has not succeeded yet, or one the driver
// answered with no device. The state cannot tell which.
func (n *Node) NoDeviceClaims() []NoDeviceClaim {
	if n.State == nil {
		return nil
	}
	var out []NoDeviceClaim
	for _, c := range n.State.Claims {
		for _, dc := range c.Drivers {
			if len(dc.Devices) > 0 || slices.ContainsFunc(dc.SkipNodeOperations, skipsPrepare) {
				continue
			}
			out = append(out, NoDeviceClaim{Claim: c.Namespace + "/" + c.Name, ClaimUID: c.UID, Driver: dc.Driver, PodUIDs: c.PodUIDs})
		}
	}
	return out
}

// skipsPrepare: a SkipNodeOperation under which the kubelet does not call
// NodePrepareResources (k8s.io/api resource/v1 SkipNodeOperation).
func skipsPrepare(op string) bool { return op == "NodePrepareResources" || op == "*" }

// rejectedSpec names the first spec file (in scan order) that declares id
// but that the CDI library does not load, with the library's error: the
// runtime skips such a file whole (pkg/cdi/cache.go refresh records the
// error and goes on), so its devices are unresolvable as if it were
// absent. "" when no such file declares id.
func rejectedSpec(reg *cdi.Registry, id string) string {
	for _, sf := range reg.Specs {
		if sf.Valid() || sf.Spec == nil || sf.Err == nil {
			continue
		}
		for _, d := range sf.Devices {
			if d == id {
				return sf.Path + ": " + sf.Err.Error()
			}
		}
	}
	return ""
}

// registrationsKnown: which drivers are registered can be told. Not when
// the registration directory was not read, nor when one of its sockets
// could not be tried (no access, gone between the listing and the dial,
// or no call could be made): that one may be any driver's live
// registration.
func (n *Node) registrationsKnown() bool {
	if n.RegistryState != kubelet.Present && n.RegistryState != kubelet.Absent {
		return false
	}
	for _, r := range n.Registrations {
		if r.Dial.Answer.CouldNotLook() {
			return false
		}
	}
	return true
}
