package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// Readers of /proc/PID files that say what the runtime applied to a
// container's process: its status (credentials, capabilities, seccomp,
// no_new_privs, PID namespace), its resource limits, its environment's
// names, its LSM label. Open and parse are split: the Parse* functions take
// bytes and touch nothing.

// ReadState says how the read of one fact went. Only ReadOK carries a fact
// about the container; every other state is a reason the fact is not
// known, and the states differ in what they tell the operator to do.
type ReadState uint8

const (
	// ReadNotRead is the zero value: nothing tried to read it.
	ReadNotRead ReadState = iota
	// ReadOK: read and parsed.
	ReadOK
	// ReadAbsent: the host does not have it (nothing at the path, a kernel
	// without the field or file, no LSM that labels processes). On a live
	// host or a capture that looked, this is itself a fact.
	ReadAbsent
	// ReadUnreadable: the kernel refused (EACCES, EPERM: reading another
	// user's /proc/PID/environ, root or mountinfo needs ptrace read access,
	// fs/proc/base.c proc_mem_open and proc_root_link), or another I/O
	// error.
	ReadUnreadable
	// ReadGone: the process exited (ESRCH, /proc/PID no longer there), or
	// is a zombie, which has no memory, root or namespaces left to show.
	ReadGone
	// ReadMalformed: read, but not in the format the kernel writes, or
	// larger than any kernel writes.
	ReadMalformed
	// ReadNotCaptured: a snapshot or tree that did not capture it.
	ReadNotCaptured
)

func (s ReadState) String() string {
	switch s {
	case ReadNotRead:
		return "not read"
	case ReadOK:
		return "ok"
	case ReadAbsent:
		return "absent"
	case ReadUnreadable:
		return "unreadable"
	case ReadGone:
		return "process gone"
	case ReadMalformed:
		return "malformed"
	case ReadNotCaptured:
		return "not captured"
	}
	return "unknown"
}

func parseReadState(s string) ReadState {
	for st := ReadOK; st <= ReadNotCaptured; st++ {
		if st.String() == s {
			return st
		}
	}
	return ReadUnreadable
}

// ProcRead is the evidence of one read: the host path and how it went. Err
// is nil for ReadOK and wraps the path otherwise.
type ProcRead struct {
	Path  string
	State ReadState
	Err   error
}

// OK reports whether the read gave a fact.
func (r ProcRead) OK() bool { return r.State == ReadOK }

// String is the evidence line: "PATH: STATE (ERROR)".
func (r ProcRead) String() string {
	if r.Err == nil {
		return r.Path + ": " + r.State.String()
	}
	return r.Path + ": " + r.State.String() + " (" + r.Err.Error() + ")"
}

// ErrMalformed marks parse errors: the bytes are not what the kernel
// writes.
var ErrMalformed = errors.New("malformed")

// errNotCaptured marks a fact that the root could not have shown.
var errNotCaptured = errors.New("not captured in this snapshot or tree")

// errZombie is what a zombie's memory, root and namespaces say.
var errZombie = errors.New("the process is a zombie (exited, not yet reaped): it has no memory, root or namespaces")

// malformed wraps ErrMalformed with what is wrong.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Read limits: status, limits and the id maps are a few KiB (a uid_map has
// at most 340 lines, kernel/user_namespace.c UID_GID_MAP_MAX_EXTENTS); a
// mountinfo of a node with thousands of overlay mounts runs to MiBs; exec
// takes at most a quarter of the stack rlimit, and never more than 6 MiB,
// for arguments and environment together (fs/exec.c bprm_stack_limits:
// 3/4 of _STK_LIM).
const (
	smallProcLimit   = 256 << 10
	mountInfoLimit   = 16 << 20
	environLimit     = 16 << 20
	lsmLabelLimit    = 4 << 10
	sysctlValueLimit = 64
)

// procReader reads one process's /proc files through a root and classifies
// what went wrong.
type procReader struct {
	root *hostfs.Root
	pid  int
	// gone: /proc/PID itself is not there (checked once, in ReadApplied).
	gone bool
}

func (pr *procReader) path(name string) string {
	return fmt.Sprintf("/proc/%d/%s", pr.pid, name)
}

// read reads /proc/PID/name (or an absolute host path) of at most limit
// bytes.
func (pr *procReader) read(name string, limit int64) ([]byte, ProcRead) {
	p := name
	if !strings.HasPrefix(p, "/") {
		p = pr.path(name)
	}
	b, err := pr.root.ReadFileLimit(p, limit)
	return b, pr.result(p, err)
}

// result classifies err for the read of host path p.
func (pr *procReader) result(p string, err error) ProcRead {
	return ProcRead{Path: p, State: pr.classify(p, err), Err: err}
}

func (pr *procReader) classify(p string, err error) ReadState {
	switch {
	case err == nil:
		return ReadOK
	case errors.Is(err, errNotCaptured):
		return ReadNotCaptured
	case errors.Is(err, ErrMalformed), errors.Is(err, hostfs.ErrTooLarge):
		return ReadMalformed
	case errors.Is(err, errZombie), errors.Is(err, unix.ESRCH):
		return ReadGone
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return ReadUnreadable
	case errors.Is(err, fs.ErrNotExist):
		if !pr.root.Covers(p) {
			return ReadNotCaptured
		}
		if pr.gone {
			return ReadGone
		}
		return ReadAbsent
	}
	return ReadUnreadable
}

// ProcStatus is what /proc/PID/status says of the process's credentials
// and confinement (fs/proc/array.c proc_pid_status). IDs are as the
// reading process's user namespace sees them (from_kuid_munged against
// the opener's namespace), as are the owners hostfs stats; capabilities
// are relative to the process's own user namespace. Fields a kernel may
// lack are pointers.
type ProcStatus struct {
	Name  string
	State string // "S (sleeping)"; "Z (zombie)" for an exited process not yet reaped
	// UID and GID are real, effective, saved and filesystem IDs; the
	// filesystem ones are what permission checks use.
	UID, GID [4]uint32
	Groups   []uint32
	// NSpid lists the PID in each PID namespace from the reader's down to
	// the process's own (the last); nil before Linux 4.1.
	NSpid                          []int
	CapInh, CapPrm, CapEff, CapBnd CapSet
	CapAmb                         *CapSet // Linux 4.3
	NoNewPrivs                     *bool   // Linux 4.10
	// Seccomp is the mode: 0 none, 1 strict, 2 filter (absent without
	// CONFIG_SECCOMP); SeccompFilters counts the filters attached (5.9).
	Seccomp        *int
	SeccompFilters *int
}

// Zombie reports whether the status says the process has exited.
func (s ProcStatus) Zombie() bool {
	return strings.HasPrefix(s.State, "Z") || strings.HasPrefix(s.State, "X")
}

// ParseProcStatus parses /proc/PID/status. Fields it does not use are
// skipped. It returns what parsed together with an error wrapping
// ErrMalformed for each used field that did not, or that is missing
// although every kernel writes it (Uid, Gid, CapInh, CapPrm, CapEff,
// CapBnd).
func ParseProcStatus(b []byte) (ProcStatus, error) {
	var s ProcStatus
	var errs []error
	nerr := 0
	addErr := func(err error) {
		if nerr < maxLineErrors {
			errs = append(errs, err)
		}
		nerr++
	}
	seen := map[string]bool{}
	bad := func(key, v string, err error) {
		addErr(malformed("status %s: %q: %v", key, short(v), err))
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		key := string(k)
		if !statusKeys[key] {
			continue
		}
		if seen[key] {
			addErr(malformed("status: %s twice", key))
			continue
		}
		seen[key] = true
		val := strings.TrimSpace(string(v))
		switch key {
		case "Name":
			s.Name = val
		case "State":
			s.State = val
		case "Uid", "Gid":
			ids, err := parseUints(val, 4)
			if err != nil {
				bad(key, val, err)
				continue
			}
			var a [4]uint32
			copy(a[:], ids)
			if key == "Uid" {
				s.UID = a
			} else {
				s.GID = a
			}
		case "Groups":
			ids, err := parseUints(val, -1)
			if err != nil {
				bad(key, val, err)
				continue
			}
			s.Groups = ids
		case "NSpid":
			ids, err := parseUints(val, -1)
			if err != nil || len(ids) == 0 {
				bad(key, val, errors.Join(err, errors.New("no PID")))
				continue
			}
			s.NSpid = make([]int, len(ids))
			for i, id := range ids {
				s.NSpid[i] = int(id)
			}
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb":
			c, err := ParseCapSet(val)
			if err != nil {
				bad(key, val, err)
				continue
			}
			switch key {
			case "CapInh":
				s.CapInh = c
			case "CapPrm":
				s.CapPrm = c
			case "CapEff":
				s.CapEff = c
			case "CapBnd":
				s.CapBnd = c
			case "CapAmb":
				s.CapAmb = &c
			}
		case "NoNewPrivs":
			switch val {
			case "0", "1":
				nnp := val == "1"
				s.NoNewPrivs = &nnp
			default:
				bad(key, val, errors.New("not 0 or 1"))
			}
		case "Seccomp", "Seccomp_filters":
			n, err := strconv.ParseUint(val, 10, 31)
			if err != nil || key == "Seccomp" && n > 2 {
				bad(key, val, errors.Join(err, errors.New("not a seccomp mode")))
				continue
			}
			v := int(n)
			if key == "Seccomp" {
				s.Seccomp = &v
			} else {
				s.SeccompFilters = &v
			}
		}
	}
	for _, k := range []string{"Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd"} {
		if !seen[k] {
			addErr(malformed("status: no %s line", k))
		}
	}
	if nerr > maxLineErrors {
		errs = append(errs, malformed("status: %d more errors", nerr-maxLineErrors))
	}
	return s, errors.Join(errs...)
}

var statusKeys = map[string]bool{
	"Name": true, "State": true, "Uid": true, "Gid": true, "Groups": true, "NSpid": true,
	"CapInh": true, "CapPrm": true, "CapEff": true, "CapBnd": true, "CapAmb": true,
	"NoNewPrivs": true, "Seccomp": true, "Seccomp_filters": true,
}

// parseUints parses white-space separated decimal uint32s; n >= 0 wants
// exactly n of them.
func parseUints(s string, n int) ([]uint32, error) {
	fields := strings.Fields(s)
	if n >= 0 && len(fields) != n {
		return nil, fmt.Errorf("%d values, want %d", len(fields), n)
	}
	out := make([]uint32, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, err
		}
		out = append(out, uint32(v))
	}
	return out, nil
}

// short bounds what an error repeats of hostile input.
func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// RLimInfinity is the kernel's RLIM_INFINITY, which /proc/PID/limits
// prints as "unlimited".
const RLimInfinity = ^uint64(0)

// RLimit is one row of /proc/PID/limits.
type RLimit struct {
	Soft, Hard uint64 // RLimInfinity for "unlimited"
	Units      string // "bytes", "seconds"...; "" for the nice and realtime priorities
}

func (l RLimit) String() string {
	f := func(v uint64) string {
		if v == RLimInfinity {
			return "unlimited"
		}
		return strconv.FormatUint(v, 10)
	}
	s := "soft " + f(l.Soft) + ", hard " + f(l.Hard)
	if l.Units != "" {
		s += " " + l.Units
	}
	return s
}

// ProcLimits is /proc/PID/limits by the kernel's limit names ("Max locked
// memory").
type ProcLimits map[string]RLimit

// MemLockName is RLIMIT_MEMLOCK's row: what VFIO and RDMA may pin without
// CAP_IPC_LOCK.
const MemLockName = "Max locked memory"

// MemLock returns RLIMIT_MEMLOCK.
func (l ProcLimits) MemLock() (RLimit, bool) {
	r, ok := l[MemLockName]
	return r, ok
}

// ParseProcLimits parses /proc/PID/limits (fs/proc/base.c proc_pid_limits:
// a header, then per limit its name, soft and hard value or "unlimited",
// and the units). The kernel pads columns to fixed widths; this parser
// does not rely on them: a row's name is everything before its first
// value. Rows that do not parse are errors and left out.
func ParseProcLimits(b []byte) (ProcLimits, error) {
	out := ProcLimits{}
	var errs []error
	header := false
	for i, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !header {
			if fields[0] != "Limit" {
				return out, malformed("limits: line 1 is not the header: %q", short(line))
			}
			header = true
			continue
		}
		v := 0
		for v < len(fields) && !isLimitValue(fields[v]) {
			v++
		}
		if v == 0 || v+1 >= len(fields) || !isLimitValue(fields[v+1]) || len(fields) > v+3 {
			if len(errs) < maxLineErrors {
				errs = append(errs, malformed("limits line %d: %q", i+1, short(line)))
			}
			continue
		}
		name := strings.Join(fields[:v], " ")
		l := RLimit{Soft: limitValue(fields[v]), Hard: limitValue(fields[v+1])}
		if len(fields) == v+3 {
			l.Units = fields[v+2]
		}
		if _, dup := out[name]; dup {
			if len(errs) < maxLineErrors {
				errs = append(errs, malformed("limits: %q twice", short(name)))
			}
			continue
		}
		out[name] = l
	}
	if !header {
		return out, malformed("limits: empty")
	}
	return out, errors.Join(errs...)
}

// maxLineErrors bounds the errors kept of one hostile file.
const maxLineErrors = 8

func isLimitValue(s string) bool {
	if s == "unlimited" {
		return true
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

func limitValue(s string) uint64 {
	if s == "unlimited" {
		return RLimInfinity
	}
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// EnvNames are the names of the variables in a process's environment,
// never their values.
type EnvNames struct {
	Read  ProcRead
	Names []string // sorted, unique
	// Malformed counts entries that are not NAME=VALUE with a printable
	// name; they are left out, unread (such an entry may be a value).
	Malformed int
}

// Has reports whether name is set; meaningful only when Read.OK().
func (e EnvNames) Has(name string) bool {
	i := sort.SearchStrings(e.Names, name)
	return i < len(e.Names) && e.Names[i] == name
}

// maxEnvName bounds a name: real ones are tens of bytes.
const maxEnvName = 1024

// ParseEnvironNames returns the sorted, unique names of a NUL-separated
// environment block (/proc/PID/environ: the block as the process was
// exec'd with, fs/proc/base.c environ_read reads env_start..env_end of its
// memory; setenv after exec does not show). Each entry is cut at its first
// '=' and the rest, the value, is never copied. An entry without '=', with
// an empty name, or whose name is not printable ASCII or longer than 1 KiB
// is counted in malformed and left out.
func ParseEnvironNames(b []byte) (names []string, malformed int) {
	seen := map[string]bool{}
	for len(b) > 0 {
		entry := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			entry, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(entry) == 0 {
			continue
		}
		i := bytes.IndexByte(entry, '=')
		if i <= 0 || i > maxEnvName || !printableName(entry[:i]) {
			malformed++
			continue
		}
		name := string(entry[:i])
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, malformed
}

func printableName(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// LSMLabel is the process's security label: /proc/PID/attr/current, which
// the first LSM that labels processes answers (SELinux, AppArmor, Smack),
// and AppArmor's own /proc/PID/attr/apparmor/current (Linux 5.8), which
// stays AppArmor's when several LSMs are stacked.
type LSMLabel struct {
	Current, AppArmor ProcRead
	// CurrentLabel and AppArmorLabel are the labels with the trailing NUL
	// and newline the LSMs write removed ("docker-default (enforce)",
	// "system_u:system_r:container_t:s0:c1,c2", "unconfined").
	CurrentLabel, AppArmorLabel string
}

// readLSM reads the labels. No LSM that labels processes answers reads of
// attr/current with EINVAL (security/security.c security_getprocattr
// returns the hook's default, -EINVAL): that is ReadAbsent, not an error.
func (pr *procReader) readLSM() LSMLabel {
	var l LSMLabel
	for _, f := range []struct {
		name  string
		read  *ProcRead
		label *string
	}{{"attr/current", &l.Current, &l.CurrentLabel}, {"attr/apparmor/current", &l.AppArmor, &l.AppArmorLabel}} {
		b, r := pr.read(f.name, lsmLabelLimit)
		if errors.Is(r.Err, unix.EINVAL) {
			r.State = ReadAbsent
			r.Err = fmt.Errorf("%s: no LSM labels processes: %w", r.Path, unix.EINVAL)
		}
		*f.read = r
		if r.OK() {
			*f.label = strings.TrimRight(string(b), "\x00\n")
		}
	}
	return l
}
