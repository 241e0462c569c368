package probe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/helper"
)

// Options configure Run.
type Options struct {
	// Dev is the /dev directory to scan ("/dev" when empty).
	Dev string
	// HelperPath is the CUDA/NVML helper; "" looks for HelperName beside
	// this executable. HelperFile, when set, is the helper already open
	// (the host-side probe opens it before it enters a container) and is
	// run from its fd; HelperPath is then only its name in the report.
	HelperPath string
	HelperFile *os.File
	// HelperRefused, when set, is why the helper at HelperPath is not run
	// (internal/helper: the host-side probe checked it before it entered
	// a container).
	HelperRefused string
	// HelperTimeout bounds the helper (DefaultHelperTimeout when 0).
	HelperTimeout time.Duration
	// Env is the environment the libraries are searched and loaded
	// with (os.Environ() when nil).
	Env []string
	// NoLibraries skips the CUDA and NVML steps (NOT_RUN, "not asked").
	NoLibraries bool
	// Nodes are more nodes to open, beside those the scan finds: the
	// ones a container was given under names no kind knows. A node whose
	// name no kind knows is opened, and gets no ioctl.
	Nodes []string
}

// Report is what a probe saw and did: the functional layer's facts.
type Report struct {
	Dev      string   `json:"dev"`
	Patterns []string `json:"patterns"`
	// Process is who probed: the identity every open was made with.
	Process Process     `json:"process"`
	Nodes   []NodeProbe `json:"nodes"`
	// DevErrors are directories of Dev that could not be read.
	DevErrors []string `json:"dev_errors,omitempty"`
	NVML      LibProbe `json:"nvml"`
	CUDA      LibProbe `json:"cuda"`
	// Elapsed is the run's wall time.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Process is the identity of the probing thread, read back from the
// kernel: what the opens were checked against.
type Process struct {
	PID        int    `json:"pid"`
	UID        int    `json:"uid"` // effective (fsuid follows it)
	GID        int    `json:"gid"`
	Groups     []int  `json:"groups,omitempty"`
	CapEff     string `json:"cap_eff"` // hex, as /proc/PID/status prints it
	CapBnd     string `json:"cap_bnd,omitempty"`
	NoNewPrivs bool   `json:"no_new_privs"`
	// Seccomp is the thread's mode: 0 none, 1 strict, 2 filter.
	Seccomp int `json:"seccomp"`
	// Cgroup is /proc/thread-self/cgroup, "" when unreadable.
	Cgroup string `json:"cgroup,omitempty"`
	// Errors are the parts that could not be read.
	Errors []string `json:"errors,omitempty"`
}

// Run scans the accelerator nodes of opt.Dev, probes each, and runs the
// NVML and CUDA steps where their libraries are. Everything runs on the
// calling goroutine (the helper is forked from its thread), so a caller
// that locked the OS thread and changed its identity gets every step made
// with that identity.
func Run(ctx context.Context, opt Options) *Report {
	start := time.Now()
	dev := opt.Dev
	if dev == "" {
		dev = "/dev"
	}
	r := &Report{Dev: dev, Patterns: Patterns(), Process: currentProcess()}
	r.Nodes, r.DevErrors = ScanNodes(dev)
	r.Nodes = addNodes(r.Nodes, opt.Nodes, dev)
	r.NVML = LibProbe{Lib: HelperNVML, Library: LibNVML}
	r.CUDA = LibProbe{Lib: HelperCUDA, Library: LibCUDA}
	if opt.NoLibraries {
		r.NVML.NotRun, r.CUDA.NotRun = "not asked (--no-libraries)", "not asked (--no-libraries)"
		r.NVML.Skip, r.CUDA.Skip = SkipNotAsked, SkipNotAsked
	} else {
		runLibraries(ctx, opt, r)
	}
	r.Elapsed = time.Since(start)
	return r
}

// addNodes probes the named nodes the scan did not find (p under the
// /dev directory dev, or absolute), with the kind their name tells, if any.
func addNodes(nodes []NodeProbe, extra []string, dev string) []NodeProbe {
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.Path] = true
	}
	for _, p := range extra {
		p = filepath.Clean(p)
		if seen[p] || !strings.HasPrefix(p, "/") {
			continue
		}
		seen[p] = true
		rel, err := filepath.Rel(dev, p)
		kind := Kind("")
		if err == nil && !strings.HasPrefix(rel, "..") {
			kind, _ = KindOf(filepath.ToSlash(rel))
		}
		nodes = append(nodes, ProbeNode(p, kind))
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Path < nodes[j].Path })
	return nodes
}

func runLibraries(ctx context.Context, opt Options, r *Report) {
	env := opt.Env
	if env == nil {
		env = os.Environ()
	}
	getenv := func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v
			}
		}
		return ""
	}
	var found []*LibProbe
	for _, l := range []*LibProbe{&r.NVML, &r.CUDA} {
		s := FindLibrary(l.Library, getenv)
		l.Search = &s
		if s.Found == "" {
			l.NotRun, l.Skip = s.SearchedString(), SkipNoLibrary
			continue
		}
		found = append(found, l)
	}
	if len(found) == 0 {
		return
	}
	if opt.HelperRefused != "" {
		for _, l := range found {
			l.NotRun = fmt.Sprintf("%s is at %s, but the helper that loads it is not run: %s", l.Library, l.Search.Found, opt.HelperRefused)
			l.Skip, l.Helper = SkipHelperUntrusted, opt.HelperPath
		}
		return
	}
	h := Helper{File: opt.HelperFile, Path: opt.HelperPath, PassFD: opt.HelperFile != nil, Timeout: opt.HelperTimeout, Env: env}
	if h.File == nil {
		if h.Path == "" {
			dir, err := helper.Dir()
			if err != nil {
				for _, l := range found {
					l.NotRun = fmt.Sprintf("%s is at %s, but the helper cannot be looked for beside this executable: %v", l.Library, l.Search.Found, err)
					l.Skip = SkipNoHelper
				}
				return
			}
			h.Path = filepath.Join(dir, HelperName)
		}
		f, err := os.Open(h.Path)
		if err != nil {
			why := err.Error()
			if errors.Is(err, os.ErrNotExist) {
				why = "it is not there"
			}
			for _, l := range found {
				l.NotRun = fmt.Sprintf("%s is at %s, but the helper that loads it, %s, cannot be opened (%s): accel-doctor is a static binary and cannot load glibc libraries itself; install %s beside it or give --cuda-helper",
					l.Library, l.Search.Found, h.Path, why, HelperName)
				l.Skip = SkipNoHelper
				if !errors.Is(err, os.ErrNotExist) {
					l.Skip = SkipHelperUnusable
				}
			}
			return
		}
		defer f.Close()
		// A root probe runs only a helper nobody else could have changed.
		if err := helper.Check(h.Path); err != nil {
			for _, l := range found {
				l.NotRun = fmt.Sprintf("%s is at %s, but the helper that loads it is not run: %v", l.Library, l.Search.Found, err)
				l.Skip, l.Helper = SkipHelperUntrusted, h.Path
			}
			return
		}
		h.File = f
	}
	RunHelper(ctx, h, found)
}

// currentProcess reads the calling thread's identity from the kernel:
// the credential calls and prctl answer for the calling thread, which is
// the one that probes.
func currentProcess() Process {
	p := Process{PID: os.Getpid(), UID: unix.Geteuid(), GID: unix.Getegid()}
	if g, err := unix.Getgroups(); err == nil {
		p.Groups = g
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil {
		p.CapEff = fmt.Sprintf("%016x", uint64(data[1].Effective)<<32|uint64(data[0].Effective))
	} else {
		p.Errors = append(p.Errors, "capget: "+err.Error())
	}
	var bnd uint64
	for c := 0; c < 64; c++ {
		v, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil {
			break // EINVAL past the last capability the kernel knows
		}
		if v == 1 {
			bnd |= 1 << c
		}
	}
	p.CapBnd = fmt.Sprintf("%016x", bnd)
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err == nil {
		p.NoNewPrivs = v == 1
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == nil {
		p.Seccomp = v
	} else if errors.Is(err, unix.EINVAL) {
		p.Seccomp = -1 // CONFIG_SECCOMP off
	}
	if b, err := os.ReadFile("/proc/thread-self/cgroup"); err == nil {
		p.Cgroup = strings.TrimSpace(string(b))
	} else {
		p.Errors = append(p.Errors, err.Error())
	}
	return p
}
