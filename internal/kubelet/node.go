package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	rpc "github.com/accel-doctor/accel-doctor/internal/kubeletrpc"
)

// DefaultKubeletDir is the kubelet's --root-dir default.
const DefaultKubeletDir = "/var/lib/kubelet"

// BootIDPath is the running kernel's boot ID (drivers/char/random.c: a
// random UUID made once per boot).
const BootIDPath = "/proc/sys/kernel/random/boot_id"

// Options tune Read.
type Options struct {
	// KubeletDir is the kubelet's --root-dir as a host path;
	// DefaultKubeletDir when empty.
	KubeletDir string
	// Timeout bounds each socket's connect and call; one second when zero.
	Timeout time.Duration
	// RPC makes the calls on the sockets (internal/kubeletrpc); without
	// one, every call is NotDialed.
	RPC Caller
}

// State says whether a file or directory could be read.
type State string

const (
	Present     State = "present"
	Absent      State = "absent"       // the host does not have it
	NotCaptured State = "not-captured" // a capture that did not look there
	Unreadable  State = "unreadable"   // there, but reading it failed (Err)
	// Denied: there, and this process may not read it (EACCES, EPERM):
	// unreadable for want of privilege, which running as root fixes.
	Denied State = "denied"
)

// CouldNotRead reports whether the state is a read that failed (for
// want of privilege or otherwise), as opposed to present, absent or not
// shown by the root.
func (s State) CouldNotRead() bool { return s == Unreadable || s == Denied }

// Node is what the node's kubelet directories and sockets show. Every
// fact carries the path it came from; nothing here judges.
type Node struct {
	// KubeletDir is the kubelet's --root-dir read (a host path).
	KubeletDir string `json:"kubelet_dir"`
	// Dir is the device-plugin directory, DirState whether it is there.
	Dir      string `json:"dir"`
	DirState State  `json:"dir_state"`
	DirErr   string `json:"dir_error,omitempty"`
	// Kubelet is kubelet.sock; nil when the directory has none.
	Kubelet *Socket `json:"kubelet,omitempty"`
	// Plugins are the other sockets (and files named like sockets), by
	// name.
	Plugins []*Socket `json:"plugins,omitempty"`

	CheckpointPath  string `json:"checkpoint_path"`
	CheckpointState State  `json:"checkpoint_state"`
	CheckpointErr   string `json:"checkpoint_error,omitempty"`
	// CheckpointMalformed: the checkpoint was read and does not parse
	// (Unreadable otherwise means it could not be read at all).
	CheckpointMalformed bool `json:"checkpoint_malformed,omitempty"`
	// CheckpointModTime is when the kubelet last wrote the checkpoint:
	// it rewrites it on every device update of any plugin and every
	// allocation (manager.go writeCheckpoint), so a plugin socket bound
	// before it had its registration's first device list in it.
	CheckpointModTime time.Time   `json:"checkpoint_mtime,omitzero"`
	Checkpoint        *Checkpoint `json:"checkpoint,omitempty"`

	// BootID is the running kernel's boot_id ("" when unreadable:
	// BootIDErr). BootIDDiffers: the checkpoint recorded a boot_id and
	// it is not this one: the node rebooted since the kubelet last wrote
	// it (what the kubelet itself concludes: detectNodeReboot in
	// manager.go, upstream after v1.37.2).
	BootID        string `json:"boot_id,omitempty"`
	BootIDErr     string `json:"boot_id_error,omitempty"`
	BootIDDiffers bool   `json:"boot_id_differs,omitempty"`

	// PodResources is the PodResources service; nil when its socket is
	// absent.
	PodResources *PodResources `json:"pod_resources,omitempty"`

	// Devices matches every device ID the checkpoint allocates against
	// the host; Allocatable every device PodResources reports allocatable
	// (internal/diagnose joins them by BDF with what layers 1-4 say of the
	// device).
	Devices     []DeviceMatch `json:"devices,omitempty"`
	Allocatable []DeviceMatch `json:"allocatable,omitempty"`

	// Replayed: the socket answers come from a snapshot, not from sockets.
	Replayed bool `json:"-"`
}

// DevicePluginDir is the device-plugin directory under a kubelet root.
func DevicePluginDir(kubeletDir string) string { return path.Join(kubeletDir, "device-plugins") }

// PodResourcesSocket is the PodResources socket under a kubelet root.
func PodResourcesSocket(kubeletDir string) string {
	return path.Join(kubeletDir, "pod-resources", PodResourcesSocketName)
}

// captureName is where a snapshot keeps what the sockets answered.
func captureName(kubeletDir string) string {
	return path.Join("kubelet", path.Clean("/"+kubeletDir), "node.json")
}

// captureFormat is the version of the capture.
const captureFormat = 1

type capture struct {
	Format int   `json:"format"`
	Node   *Node `json:"node"`
}

// ErrKubeletDir: the kubelet directory given is not a host-absolute path.
var ErrKubeletDir = errors.New("not a host-absolute path")

// Read reads the node's kubelet state through root. On a snapshot it
// replays what the sockets answered when the snapshot was taken (a
// socket cannot be archived); on a host it dials each socket once, with
// read-only calls only. Read fails only when it could look at nothing;
// every partial failure is a fact in Node.
func Read(ctx context.Context, root *hostfs.Root, opts Options) (*Node, error) {
	kdir := opts.KubeletDir
	if kdir == "" {
		kdir = DefaultKubeletDir
	}
	if !strings.HasPrefix(kdir, "/") {
		return nil, fmt.Errorf("kubelet dir %q: %w", kdir, ErrKubeletDir)
	}
	kdir = path.Clean(kdir)
	if b, ok := root.Captured(captureName(kdir)); ok {
		n, err := replay(b)
		if err != nil {
			return nil, fmt.Errorf("%s: captured kubelet state: %w", kdir, err)
		}
		// The host's device evidence is in the snapshot's own files.
		n.matchDevices(readHostDevices(root))
		return n, nil
	}
	if _, ok := root.ReadSnapshotMeta(); ok {
		// A snapshot or tree archive without the capture (taken before
		// layer 6 existed, or by a tool that did not read it): sockets
		// cannot be archived and the checkpoint never is, so what the
		// tree shows there is not what the host had.
		return notCaptured(root, kdir), nil
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	n := &Node{KubeletDir: kdir, Dir: DevicePluginDir(kdir)}
	n.CheckpointPath = path.Join(n.Dir, CheckpointName)

	var wg sync.WaitGroup
	wg.Go(func() { n.readCheckpoint(root, kdir) })
	reg, plugins, err := listSocketDir(root, n.Dir)
	n.DirState, n.DirErr = StateOf(root, n.Dir, kdir, err)
	n.Kubelet, n.Plugins = reg, plugins
	calls, file := socketCalls(reg, plugins)
	p := PodResourcesSocket(kdir)
	if _, err := root.Lstat(p); err == nil {
		calls = append(calls, rpc.Call{Path: p, Method: rpc.MethodPodResourcesList})
	}
	if len(calls) > 0 {
		// Beside the checkpoint and the reads below: a helper's start
		// and the sockets' answers are most of this reader's time.
		wg.Go(func() {
			caller := opts.RPC
			if caller == nil {
				caller = rpc.NoCaller
			}
			replies := caller.Call(ctx, root, calls, timeout)
			if len(replies) != len(calls) {
				replies = rpc.NotDialedReplies(calls, fmt.Errorf("%w: %d replies to %d calls", rpc.ErrInternal, len(replies), len(calls)))
			}
			if calls[len(calls)-1].Method == rpc.MethodPodResourcesList {
				n.PodResources = replies[len(replies)-1].PodResources
				replies = replies[:len(replies)-1]
			}
			file(replies)
		})
	}
	id, err := root.ReadString(BootIDPath)
	if err != nil {
		n.BootIDErr = err.Error()
	} else {
		n.BootID = id
	}
	hd := readHostDevices(root)
	wg.Wait()
	n.matchDevices(hd)
	if root.Recording() { // the JSON is only for a snapshot being taken
		root.Capture(captureName(kdir), n.marshalCapture())
	}
	return n, nil
}

// notCaptured is the node of a snapshot that recorded nothing of the
// kubelet's directory.
func notCaptured(root *hostfs.Root, kdir string) *Node {
	why := "this snapshot holds no record of the kubelet's sockets and checkpoint"
	n := &Node{KubeletDir: kdir, Dir: DevicePluginDir(kdir), DirState: NotCaptured, DirErr: why, Replayed: true,
		CheckpointState: NotCaptured, CheckpointErr: why}
	n.CheckpointPath = path.Join(n.Dir, CheckpointName)
	if id, err := root.ReadString(BootIDPath); err == nil {
		n.BootID = id
	} else {
		n.BootIDErr = err.Error()
	}
	return n
}

// StateOf classifies the outcome err of reading p, a path under the
// kubelet directory top: Present; Absent when the host could have shown p
// or a missing ancestor of it up to top (a tree without
// /var/lib/kubelet/device-plugins has no checkpoint in it, but a tree
// without /var/lib says nothing of either: a sysfs capture); NotCaptured when this root does not show that part of the host,
// with the reason when the root was assembled from mounts and none gives p
// (hostfs.NotGiven: a pod's /host); Denied or Unreadable with the error.
func StateOf(root *hostfs.Root, p, top string, err error) (State, string) {
	switch {
	case err == nil:
		return Present, ""
	case errors.Is(err, fs.ErrNotExist):
		for q := p; ; q = path.Dir(q) {
			if root.Covers(q) {
				return Absent, ""
			}
			if q == top || q == "/" || root.Exists(path.Dir(q)) {
				break
			}
		}
		if why, ng := root.NotGiven(p); ng {
			return NotCaptured, why
		}
		return NotCaptured, ""
	case errors.Is(err, fs.ErrPermission):
		return Denied, err.Error()
	}
	return Unreadable, err.Error()
}

// readCheckpoint reads and parses the checkpoint. A snapshot never keeps
// the file itself: its AllocateResponses hold the environment a plugin
// gave each container, which may carry secrets; the capture keeps what
// was parsed, without environment values.
func (n *Node) readCheckpoint(root *hostfs.Root, kdir string) {
	b, err := root.ReadFileRedacted(n.CheckpointPath, MaxCheckpointSize, func([]byte) []byte { return nil })
	if errors.Is(err, hostfs.ErrTooLarge) {
		n.CheckpointState, n.CheckpointErr = Unreadable, fmt.Sprintf("%v: larger than %d bytes: not a checkpoint the kubelet wrote", err, MaxCheckpointSize)
		return
	}
	n.CheckpointState, n.CheckpointErr = StateOf(root, n.CheckpointPath, kdir, err)
	if err != nil {
		return
	}
	cp, err := ParseCheckpoint(b)
	if err != nil {
		n.CheckpointState, n.CheckpointErr = Unreadable, fmt.Sprintf("%s: %v", n.CheckpointPath, err)
		n.CheckpointMalformed = true
		return
	}
	n.Checkpoint = cp
	if m, err := root.ModTime(n.CheckpointPath); err == nil {
		n.CheckpointModTime = m
	}
}

func (n *Node) matchDevices(hd *hostDevices) {
	n.BootIDDiffers = n.Checkpoint != nil && n.Checkpoint.BootID != "" && n.BootID != "" && n.Checkpoint.BootID != n.BootID
	n.Devices, n.Allocatable = nil, nil
	alloc := n.PodResources.AllocatableIDs()
	if n.Checkpoint != nil {
		n.Devices = matchAllocations(hd, n.Checkpoint, alloc)
	}
	if alloc != nil {
		n.Allocatable = matchAllocatable(hd, alloc)
	}
}

func (n *Node) marshalCapture() []byte {
	c := capture{Format: captureFormat, Node: n}
	b, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	return b
}

// replay decodes a capture. It is a parser of untrusted bytes (someone
// else's snapshot): bad input is an error.
func replay(b []byte) (*Node, error) {
	var c capture
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if c.Format != captureFormat {
		return nil, fmt.Errorf("capture format %d, want %d", c.Format, captureFormat)
	}
	if c.Node == nil {
		return nil, errors.New("capture holds no node")
	}
	n := c.Node
	n.Replayed = true
	if len(n.Plugins) > 1<<16 {
		return nil, fmt.Errorf("%d plugin sockets: more than a directory listing holds", len(n.Plugins))
	}
	for _, s := range n.Plugins {
		if s == nil {
			return nil, errors.New("capture holds a null plugin socket")
		}
	}
	return n, nil
}

// Resources are the resource names the node's kubelet knows of, with
// where each was seen: "checkpoint" (RegisteredDevices), "allocatable"
// (PodResources), "socket" (a plugin socket named by a known plugin's
// convention, which answered).
func (n *Node) Resources() map[string][]string {
	out := map[string][]string{}
	add := func(r, src string) {
		for _, s := range out[r] {
			if s == src {
				return
			}
		}
		out[r] = append(out[r], src)
	}
	if n.Checkpoint != nil {
		for r := range n.Checkpoint.Registered {
			add(r, "checkpoint")
		}
	}
	for r := range n.PodResources.AllocatableIDs() {
		add(r, "allocatable")
	}
	for _, s := range n.Plugins {
		if s.Resource != "" && s.Dial.OK() {
			add(s.Resource, "socket")
		}
	}
	return out
}

// PluginPresence is what the node shows of the plugin a driver's devices
// need.
type PluginPresence struct {
	Vendor VendorPlugin
	Known  bool // the driver has a row in VendorPlugins
	// Sockets are the plugin sockets named by the vendor's convention.
	Sockets []*Socket
	// Seen maps each of the vendor's resources the node knows of to where
	// it was seen (see Resources).
	Seen map[string][]string
}

// PluginFor says what the node shows of the plugin for devices bound to
// driver: the caller knows (layers 1-3) that such devices exist with
// their nodes.
func (n *Node) PluginFor(driver string) PluginPresence {
	v, ok := VendorPluginFor(driver)
	p := PluginPresence{Vendor: v, Known: ok, Seen: map[string][]string{}}
	if !ok {
		return p
	}
	for r, src := range n.Resources() {
		if v.MatchesResource(r) {
			p.Seen[r] = src
		}
	}
	for _, s := range n.Plugins {
		if s.Resource != "" && v.MatchesResource(s.Resource) {
			p.Sockets = append(p.Sockets, s)
		}
	}
	sort.Slice(p.Sockets, func(i, j int) bool { return p.Sockets[i].Name < p.Sockets[j].Name })
	return p
}
