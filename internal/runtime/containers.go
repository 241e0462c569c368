package runtime

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Runtime names what made or runs a container, as far as its state shows.
type Runtime string

const (
	Runc       Runtime = "runc"
	Crun       Runtime = "crun"
	Containerd Runtime = "containerd"
	Docker     Runtime = "docker"
	CRIO       Runtime = "cri-o"
	Podman     Runtime = "podman"
)

// Status is a container's state: what its state files say, checked
// against /proc.
type Status string

const (
	StatusCreated Status = "created" // init exists, waiting on exec.fifo for start
	StatusRunning Status = "running"
	StatusPaused  Status = "paused" // its cgroup is frozen
	StatusStopped Status = "stopped"
	StatusUnknown Status = "unknown" // no init PID known, or /proc could not tell
)

// SourceKind names a kind of runtime state file or directory.
type SourceKind string

const (
	SourceRuncState  SourceKind = "runc-state"         // ROOT/[NAMESPACE/]ID/state.json
	SourceCrunStatus SourceKind = "crun-status"        // ROOT/[NAMESPACE/]ID/status
	SourceTaskBundle SourceKind = "containerd-bundle"  // io.containerd.runtime.v2.task/NAMESPACE/ID
	SourceStorage    SourceKind = "containers-storage" // /run/containers/storage/DRIVER-containers/ID/userdata
)

// Source is one place a container was found: a state file, or a bundle
// or storage directory.
type Source struct {
	Kind SourceKind
	Path string // host path
}

// Container is one container as the runtimes' state on the host describes
// it. Each fact comes from the sources listed; what a source could not
// tell is in Errors, and the rest stays.
type Container struct {
	ID string
	// Runtime is the manager when the state shows one (docker, containerd,
	// cri-o, podman), else the OCI runtime (runc, crun).
	Runtime Runtime
	// OCIRuntime is the low-level runtime whose state file was read; ""
	// when none was.
	OCIRuntime Runtime
	// RuntimeBinary is the OCI runtime binary containerd's runc shim runs
	// for this container (options.json binary_name: "runc", or a wrapper
	// such as nvidia-container-runtime); "" when not recorded.
	RuntimeBinary string
	Namespace     string // containerd namespace ("k8s.io", "moby", "default"); "" for none
	Bundle        string // host path of the OCI bundle directory
	ConfigPath    string // host path of the config.json read (or that could not be)
	StatePath     string // host path of the runtime's state file (runc state.json, crun status, CRI-O state.json)
	Sources       []Source

	PID int // the init process, in the host's PID namespace; 0: not known
	// StartTime is the init process's start time as the runtime recorded
	// it (clock ticks after boot, field 22 of /proc/PID/stat); 0: not
	// recorded, and PID reuse cannot be ruled out.
	StartTime    uint64
	Status       Status
	StatusReason string // what the status rests on
	Created      time.Time

	Annotations map[string]string
	Spec        *specs.Spec // the parsed config.json; nil when it could not be read
	// CgroupPaths (runc): controller -> host directory of the container's
	// cgroup; "" is the unified hierarchy.
	CgroupPaths map[string]string
	// CgroupPath is the cgroup path the runtime names: crun's cgroup-path,
	// else the spec's linux.cgroupsPath (for systemd, "SLICE:PREFIX:NAME").
	CgroupPath string
	Pod        *Pod // nil when the annotations name no pod

	Errors []error
}

// Ref names the container for messages: "NAMESPACE/ID" when it has a
// containerd namespace, else the ID.
func (c Container) Ref() string {
	if c.Namespace != "" {
		return c.Namespace + "/" + c.ID
	}
	return c.ID
}

// Alive reports whether the init process is there (created, running or
// paused).
func (c Container) Alive() bool {
	return c.Status == StatusRunning || c.Status == StatusCreated || c.Status == StatusPaused
}

// ociRoot is a directory holding one state directory per container of an
// OCI runtime (runc's --root, crun's state root).
type ociRoot struct {
	Dir     string
	Runtime Runtime // who keeps it; "" for runc's or crun's own default
	PerNS   bool    // laid out as DIR/NAMESPACE/ID
}

// The OCI runtime roots looked at:
//   - /run/runc: runc's default --root for root (main.go); CRI-O's runc
//     runtime_root, its default before CRI-O 1.31 (pkg/config
//     DefaultRuntimeRoot);
//   - /run/crun: crun's default state root (src/libcrun/status.c
//     get_run_directory); CRI-O's default from 1.31, and Podman's;
//   - /run/containerd/runc/NAMESPACE: containerd's runc shim, RuncRoot
//     joined with the namespace (cmd/containerd-shim-runc-v2/process
//     utils.go RuncRoot, init.go NewRunc);
//   - /run/docker/runtime-runc/NAMESPACE: dockerd gives the shim the root
//     EXECROOT/runtime-runc (daemon/runtime_unix.go defaultV2ShimConfig;
//     EXECROOT defaults to /var/run/docker, cmd/dockerd/config_unix.go),
//     the shim adds containerd's namespace, "moby" for Docker's
//     containers.
//
// A containerd bundle's options.json may name another root; it is read
// too (taskBundle.RuncRoot).
var ociRoots = []ociRoot{
	{Dir: "/run/runc"},
	{Dir: "/run/crun"},
	{Dir: "/run/containerd/runc", Runtime: Containerd, PerNS: true},
	{Dir: "/run/docker/runtime-runc", Runtime: Docker, PerNS: true},
}

// dockerNamespace is the containerd namespace dockerd uses for its
// containers (daemon/daemon.go ContainersNamespace).
const dockerNamespace = "moby"

// ErrNotCaptured marks a runtime directory a capture did not look at: its
// absence says nothing about the host.
var ErrNotCaptured = errors.New("not in this capture")

var errNotDir error = syscall.ENOTDIR

// Containers lists every container the runtimes' state on the host shows,
// through the root only (no runtime is run, no socket dialled). Sources
// that describe the same container (runc's state, containerd's bundle,
// CRI-O's storage) are merged into one Container. The errors are those
// that belong to no container: a runtime directory that could not be
// listed, or that a capture does not hold (ErrNotCaptured); a container's
// own problems are in its Errors.
func Containers(root *hostfs.Root) ([]Container, []error) {
	s := newScanner(root, nil)
	s.scan()
	return s.containers(), s.errs
}

type key struct{ ns, id string }

// entry gathers what every source says about one container.
type entry struct {
	key
	oci       *ociState
	ociDir    string  // the OCI runtime's state directory
	ociFile   string  // the state file read (or that could not be)
	ociFormat Runtime // runc or crun, by the file found
	ociHint   Runtime // who keeps the OCI root it was found in
	bundle    *taskBundle
	storage   *storageContainer
	sources   []Source
	errs      []error
}

type scanner struct {
	root    *hostfs.Root
	want    func(ns, id string) bool // nil: every container
	entries map[key]*entry
	errs    []error

	recorded *bool // the root is a recorded snapshot (set by covered)
}

func newScanner(root *hostfs.Root, want func(ns, id string) bool) *scanner {
	return &scanner{root: root, want: want, entries: map[key]*entry{}}
}

func (s *scanner) wanted(k key) bool { return s.want == nil || s.want(k.ns, k.id) }

func (s *scanner) entry(k key) *entry {
	e := s.entries[k]
	if e == nil {
		e = &entry{key: k}
		s.entries[k] = e
	}
	return e
}

// scan reads every source, OCI runtime roots first so that a bundle's own
// runc root is read only for containers not found in the usual ones.
func (s *scanner) scan() {
	for _, r := range ociRoots {
		for _, d := range s.stateDirs(r) {
			s.readOCI(d.key, d.dir, r.Runtime)
		}
	}
	for _, top := range taskBundleRoots {
		for _, ns := range s.list(top, true) {
			for _, id := range s.list(path.Join(top, ns), false) {
				k := key{ns, id}
				if strings.HasPrefix(id, ".") || !s.wanted(k) {
					// containerd renames a bundle to ".ID" to delete it
					// (core/runtime/v2/bundle.go atomicDelete).
					continue
				}
				b, ok := readTaskBundle(s.root, path.Join(top, ns, id))
				if !ok {
					continue
				}
				e := s.entry(k)
				e.bundle = &b
				e.sources = append(e.sources, Source{SourceTaskBundle, b.Dir})
				if b.RuncRoot != "" && e.oci == nil && path.IsAbs(b.RuncRoot) {
					hint := Containerd
					if ns == dockerNamespace {
						hint = Docker
					}
					s.readOCI(k, path.Join(path.Clean(b.RuncRoot), ns, id), hint)
				}
			}
		}
	}
	for _, drv := range s.list(storageRunRoot, true) {
		if !strings.HasSuffix(drv, "-containers") {
			continue
		}
		for _, id := range s.list(path.Join(storageRunRoot, drv), false) {
			k := key{"", id}
			if !s.wanted(k) {
				continue
			}
			c, ok := readStorageContainer(s.root, drv, id)
			if !ok {
				continue
			}
			e := s.entry(k)
			e.storage = &c
			e.sources = append(e.sources, Source{SourceStorage, c.RunDir})
		}
	}
}

type stateDir struct {
	key
	dir string
}

// stateDirs lists the per-container directories of an OCI runtime root.
func (s *scanner) stateDirs(r ociRoot) []stateDir {
	var out []stateDir
	add := func(ns, parent string) {
		for _, id := range s.list(parent, !r.PerNS) {
			if k := (key{ns, id}); s.wanted(k) {
				out = append(out, stateDir{k, path.Join(parent, id)})
			}
		}
	}
	if !r.PerNS {
		add("", r.Dir)
		return out
	}
	for _, ns := range s.list(r.Dir, true) {
		add(ns, path.Join(r.Dir, ns))
	}
	return out
}

// list lists a directory of the runtime state: IDs or namespaces. A
// directory that is not there is empty (that runtime is not installed);
// for a top-level one that a capture did not look at, that is an error.
// A name no runtime would write is an error and skipped.
func (s *scanner) list(dir string, top bool) []string {
	names := listDir(s.root, dir, &s.errs)
	if len(names) == 0 && top && !s.covered(dir) {
		s.errs = append(s.errs, &fs.PathError{Op: "scan", Path: dir, Err: ErrNotCaptured})
	}
	out := names[:0]
	for _, n := range names {
		if err := validName(n); err != nil {
			s.errs = append(s.errs, &fs.PathError{Op: "scan", Path: dir, Err: err})
			continue
		}
		out = append(out, n)
	}
	return out
}

// covered reports whether the absence of a runtime directory means the
// host had none. The live host and a recorded snapshot answer exactly
// (hostfs.Root.Covers); a tree (a fixture, another tool's capture) covers
// it when it holds one of its ancestors below "/": a tree with /run but
// no /run/containerd shows a host without containerd, one without /run
// shows nothing about runtimes.
func (s *scanner) covered(dir string) bool {
	if s.root.Covers(dir) {
		return true
	}
	if s.recorded == nil {
		m, ok := s.root.ReadSnapshotMeta()
		rec := ok && !m.Tree && m.Format >= hostfs.SnapshotFormat
		s.recorded = &rec
	}
	if *s.recorded {
		return false
	}
	for q := path.Dir(dir); q != "/"; q = path.Dir(q) {
		if s.root.Exists(q) {
			return true
		}
	}
	return false
}

// listDir lists dir; a missing one is empty, any other failure (a file
// where it should be, a link loop, no permission) an error.
func listDir(root *hostfs.Root, dir string, errs *[]error) []string {
	names, err := root.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			*errs = append(*errs, err)
		}
		return nil
	}
	return names
}

// maxIDLen bounds a container ID or namespace name: runtimes' IDs are 64
// hex digits or a few dozen characters (containerd's identifiers allow
// 76).
const maxIDLen = 1024

// validName checks a directory name or a query as a container ID or a
// namespace: not empty, no path separator, not "." or "..", no control
// characters, at most maxIDLen bytes. The runtimes allow less (runc:
// letters, digits and "_+-.", libcontainer/factory_linux.go validateID),
// but anything else is still safe to name in a path and in a message.
func validName(n string) error {
	switch {
	case n == "":
		return errors.New("empty name")
	case len(n) > maxIDLen:
		return fmt.Errorf("name of %d bytes (at most %d)", len(n), maxIDLen)
	case n == "." || n == "..":
		return fmt.Errorf("name %q", n)
	case strings.ContainsRune(n, '/'):
		return fmt.Errorf("name %q holds a /", clip(n))
	}
	for _, r := range n {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("name %q holds a control character", clip(n))
		}
	}
	return nil
}

// readOCI reads the OCI runtime state in dir: runc's state.json, else
// crun's status. A directory holding neither is no container.
func (s *scanner) readOCI(k key, dir string, hint Runtime) {
	for _, f := range []struct {
		name   string
		format Runtime
		kind   SourceKind
		redact func([]byte) []byte
		parse  func([]byte) (ociState, error)
	}{
		{runcStateFile, Runc, SourceRuncState, redactRuncState, parseRuncState},
		{crunStateFile, Crun, SourceCrunStatus, redactCrunStatus, parseCrunStatus},
	} {
		p := path.Join(dir, f.name)
		b, err := s.root.ReadFileRedacted(p, MaxStateSize, f.redact)
		if err != nil && absent(err) {
			continue
		}
		e := s.entry(k)
		e.ociDir, e.ociFile, e.ociFormat = dir, p, f.format
		if e.ociHint == "" {
			e.ociHint = hint
		}
		e.sources = append(e.sources, Source{f.kind, p})
		if err != nil {
			e.errs = append(e.errs, err)
			return
		}
		st, err := f.parse(b)
		if err != nil {
			e.errs = append(e.errs, &fs.PathError{Op: "parse", Path: p, Err: err})
			return
		}
		if st.ID != "" && st.ID != k.id {
			e.errs = append(e.errs, fmt.Errorf("%s names container %q, its directory %q", p, clip(st.ID), k.id))
		}
		for _, w := range st.Warnings {
			e.errs = append(e.errs, &fs.PathError{Op: "parse", Path: p, Err: w})
		}
		e.oci = &st
		return
	}
}

// containers builds the merged containers, sorted by namespace and ID.
func (s *scanner) containers() []Container {
	out := make([]Container, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, s.build(e))
	}
	slices.SortFunc(out, func(a, b Container) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// build merges what the sources of one container say.
func (s *scanner) build(e *entry) Container {
	c := Container{ID: e.id, Namespace: e.ns, Sources: e.sources, StatePath: e.ociFile}
	c.Errors = append(c.Errors, e.errs...)
	if e.bundle != nil {
		c.Errors = append(c.Errors, e.bundle.Errors...)
		c.RuntimeBinary = e.bundle.BinaryName
	}
	if e.storage != nil {
		c.Errors = append(c.Errors, e.storage.Errors...)
		if c.StatePath == "" {
			c.StatePath = e.storage.StatePath
		}
	}
	s.spec(&c, e)
	c.Runtime, c.OCIRuntime = runtimeOf(e, c.Annotations)
	s.pid(&c, e)
	if e.oci != nil && !e.oci.Created.IsZero() {
		c.Created = e.oci.Created
	} else if e.storage != nil && e.storage.State != nil {
		c.Created = e.storage.State.Created
	}
	if e.oci != nil {
		c.CgroupPaths, c.CgroupPath = e.oci.CgroupPaths, e.oci.CgroupPath
	}
	if c.CgroupPath == "" && c.Spec != nil && c.Spec.Linux != nil {
		c.CgroupPath = c.Spec.Linux.CgroupsPath
	}
	if p, ok := PodOf(c.Annotations); ok {
		c.Pod = &p
	}
	s.status(&c, e)
	return c
}

// spec finds the bundle and reads its config.json: containerd's bundle
// directory, CRI-O's run directory, else the bundle runc or crun recorded.
// The annotations come from the spec, else from runc's labels, else from
// CRI-O's state.
func (s *scanner) spec(c *Container, e *entry) {
	switch {
	case e.bundle != nil:
		c.Bundle, c.Spec = e.bundle.Dir, e.bundle.Spec
	case e.storage != nil:
		c.Bundle, c.Spec = e.storage.RunDir, e.storage.Spec
	case e.oci != nil && e.oci.Bundle != "":
		c.Bundle = e.oci.Bundle
		if !path.IsAbs(c.Bundle) {
			c.Errors = append(c.Errors, fmt.Errorf("%s: bundle %q is not an absolute path", e.ociFile, clip(c.Bundle)))
			break
		}
		sp, err := ReadSpec(s.root, path.Join(c.Bundle, "config.json"))
		if err != nil {
			c.Errors = append(c.Errors, err)
		}
		c.Spec = sp
	}
	if c.Bundle != "" {
		c.ConfigPath = path.Join(c.Bundle, "config.json")
	}
	switch {
	case c.Spec != nil:
		c.Annotations = c.Spec.Annotations
	case e.oci != nil && len(e.oci.Labels) > 0:
		c.Annotations = e.oci.Labels
	case e.storage != nil && e.storage.State != nil:
		c.Annotations = e.storage.State.Annotations
	}
}

// runtimeOf names the manager from where the container was found and what
// its annotations say, and the OCI runtime from the state file read.
func runtimeOf(e *entry, ann map[string]string) (manager, oci Runtime) {
	oci = e.ociFormat
	if oci == "" && e.bundle != nil {
		switch path.Base(e.bundle.BinaryName) {
		case "runc":
			oci = Runc
		case "crun":
			oci = Crun
		}
	}
	switch {
	case e.ociHint == Docker || (e.ns == dockerNamespace && (e.bundle != nil || e.ociHint == Containerd)):
		manager = Docker
	case e.storage != nil:
		switch {
		case ann[annContainerManager] == "libpod":
			manager = Podman
		case ann[annContainerManager] == "cri-o", e.storage.State != nil:
			manager = CRIO
		default:
			if p, ok := PodOf(ann); ok && p.From == "cri-o" {
				manager = CRIO
			}
		}
	case e.bundle != nil || e.ociHint == Containerd:
		manager = Containerd
	case ann[annContainerManager] == "cri-o":
		manager = CRIO
	case ann[annContainerManager] == "libpod":
		manager = Podman
	}
	if manager == "" {
		manager = oci
	}
	return manager, oci
}

// pidSource is one source's claim on the init PID.
type pidSource struct {
	what  string
	pid   int
	start uint64
}

// pid picks the init PID: the OCI runtime's state first (it carries the
// start time), then CRI-O's state, conmon's pidfile, containerd's
// init.pid. Sources that disagree are an error; the first one wins.
func (s *scanner) pid(c *Container, e *entry) {
	var claims []pidSource
	if e.oci != nil {
		claims = append(claims, pidSource{e.ociFile, e.oci.PID, e.oci.StartTime})
	}
	if st := e.storage; st != nil {
		if st.State != nil {
			claims = append(claims, pidSource{st.StatePath + " initPid", st.State.InitPID, st.State.InitStartTime},
				pidSource{st.StatePath + " pid", st.State.Pid, 0})
		}
		claims = append(claims, pidSource{path.Join(st.RunDir, "pidfile"), st.PID, 0})
	}
	if e.bundle != nil {
		claims = append(claims, pidSource{path.Join(e.bundle.Dir, "init.pid"), e.bundle.PID, 0})
	}
	var first *pidSource
	for i := range claims {
		cl := &claims[i]
		if cl.pid == 0 {
			continue
		}
		if first == nil {
			first = cl
			c.PID, c.StartTime = cl.pid, cl.start
			continue
		}
		if cl.pid != first.pid {
			c.Errors = append(c.Errors, fmt.Errorf("%s says init PID %d, %s says %d", first.what, first.pid, cl.what, cl.pid))
		} else if c.StartTime == 0 {
			c.StartTime = cl.start
		}
	}
}

// status decides the container's status from its init process as /proc
// shows it, guarding against PID reuse with the recorded start time, the
// way runc does (libcontainer/container_linux.go refreshState, hasInit):
// paused when its cgroup is frozen, created while exec.fifo waits,
// stopped when init is gone, a zombie, or another process.
func (s *scanner) status(c *Container, e *entry) {
	if c.PID == 0 {
		c.Status, c.StatusReason = StatusUnknown, "no state names the init PID"
		if e.storage != nil && e.storage.State != nil && e.storage.State.Status == specs.StateStopped {
			c.Status, c.StatusReason = StatusStopped, e.storage.StatePath+" says stopped and names no init PID"
		}
		return
	}
	st, err := readProcStat(s.root, c.PID)
	switch {
	case err != nil && processGone(s.root, c.PID, err):
		c.Status, c.StatusReason = StatusStopped, fmt.Sprintf("init process %d no longer exists", c.PID)
		return
	case err != nil && errors.Is(err, fs.ErrNotExist):
		c.Status, c.StatusReason = StatusUnknown, fmt.Sprintf("this capture holds no /proc/%d", c.PID)
		return
	case err != nil:
		c.Status, c.StatusReason = StatusUnknown, err.Error()
		return
	case st.State == 'Z' || st.State == 'X':
		c.Status, c.StatusReason = StatusStopped, fmt.Sprintf("init process %d has exited (state %c, not yet reaped)", c.PID, st.State)
		return
	case c.StartTime != 0 && st.StartTime != c.StartTime:
		c.Status, c.StatusReason = StatusStopped, fmt.Sprintf("PID %d is another process now: it started at tick %d, the container's init at tick %d (PID reused)",
			c.PID, st.StartTime, c.StartTime)
		return
	}
	c.Status, c.StatusReason = StatusRunning, fmt.Sprintf("init process %d is alive, start time %d matches the state", c.PID, st.StartTime)
	if c.StartTime == 0 {
		c.StatusReason = fmt.Sprintf("init process %d exists; no start time was recorded to rule out PID reuse", c.PID)
	}
	if e.oci == nil {
		return
	}
	if frozen, where := s.frozen(e.oci); frozen {
		c.Status, c.StatusReason = StatusPaused, where+" says the cgroup is frozen"
		return
	}
	if fifo := path.Join(e.ociDir, execFifoFile); s.present(fifo) {
		c.Status, c.StatusReason = StatusCreated, fmt.Sprintf("init process %d waits on %s to be started", c.PID, fifo)
	}
}

// frozen reads the container's freezer state, where runc's GetFreezerState
// does: cgroup v1 freezer.state ("FROZEN"), else cgroup v2 cgroup.freeze
// ("1") (Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst,
// cgroup-v2.rst). A freezer that cannot be read is not frozen.
func (s *scanner) frozen(st *ociState) (bool, string) {
	var cands []string
	if d := st.CgroupPaths["freezer"]; d != "" {
		cands = append(cands, path.Join(d, "freezer.state"))
	} else if d := st.CgroupPaths[""]; d != "" {
		cands = append(cands, path.Join(d, "cgroup.freeze"))
	}
	if p := st.CgroupPath; p != "" && path.IsAbs(p) {
		cands = append(cands, path.Join("/sys/fs/cgroup", p, "cgroup.freeze"), path.Join("/sys/fs/cgroup/freezer", p, "freezer.state"))
	}
	for _, p := range cands {
		if !path.IsAbs(p) {
			continue
		}
		v, err := s.root.ReadString(p)
		if err != nil {
			continue
		}
		return v == "FROZEN" || (path.Base(p) == "cgroup.freeze" && v == "1"), p
	}
	return false, ""
}

// present reports whether p (a FIFO: exec.fifo) exists. A snapshot cannot
// hold a FIFO, so what a live look saw travels as a captured answer.
func (s *scanner) present(p string) bool {
	name := path.Join("runtime/present", p)
	if _, err := s.root.Lstat(p); err == nil {
		s.root.Capture(name, []byte("present\n"))
		return true
	}
	if s.root.IsLive() {
		return false
	}
	_, ok := s.root.Captured(name)
	return ok
}
