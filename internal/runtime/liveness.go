package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// maxPID is the kernel's PID_MAX_LIMIT on 64-bit (include/linux/threads.h:
// 4 * 1024 * 1024): no PID is larger, so a state file's larger number is
// corrupt, not a process.
const maxPID = 4 << 20

// maxProcFile bounds /proc/PID/stat and /proc/PID/cgroup: the first is one
// line of a few hundred bytes; the second one line per hierarchy.
const maxProcFile = 64 << 10

// procStat is what /proc/PID/stat says that the lookup uses.
type procStat struct {
	State     byte   // R, S, D, Z, X, ... (fs/proc/array.c task_state_array)
	StartTime uint64 // field 22: clock ticks after boot the process started
}

// parseProcStat parses /proc/PID/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted after the last ')' (fs/proc/array.c do_task_stat; proc(5)).
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	if len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("state %q is not one letter", f[0])
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("starttime %q: %w", f[19], err)
	}
	return procStat{State: f[0][0], StartTime: start}, nil
}

// cgroupLine is one line of /proc/PID/cgroup: "ID:CONTROLLERS:PATH"
// (kernel/cgroup/cgroup.c proc_cgroup_show). Hier is "ID:CONTROLLERS",
// which names the hierarchy ("0:" is cgroup v2).
type cgroupLine struct {
	Hier string
	Path string
}

// parseProcCgroup parses /proc/PID/cgroup. The path is everything after
// the second colon (a cgroup name may hold colons).
func parseProcCgroup(b []byte) ([]cgroupLine, error) {
	var out []cgroupLine
	for n, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrl, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("line %d: %q is not ID:CONTROLLERS:PATH", n+1, line)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return nil, fmt.Errorf("line %d: hierarchy ID %q is not a number", n+1, id)
		}
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("line %d: path %q is not absolute", n+1, p)
		}
		out = append(out, cgroupLine{Hier: id + ":" + ctrl, Path: p})
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup lines")
	}
	return out, nil
}

// within reports whether the process whose cgroups are member lives in
// the cgroups of init, or below them: on every hierarchy both list. A
// process runc exec'd into a container joins all of the container's
// cgroups, while a host process shares at most those the runtime did not
// create for it (a controller it does not manage, where init stays in its
// parent's cgroup): asking for all of them keeps such a process out. At
// least one of init's cgroups must be its own (not the root), or every
// process would match. depth is how specific the match is (the summed
// length of init's paths), to prefer a nested container over its parent.
func within(member, init []cgroupLine) (ok bool, depth int) {
	byHier := make(map[string]string, len(member))
	for _, l := range member {
		byHier[l.Hier] = l.Path
	}
	common, own := 0, false
	for _, l := range init {
		mp, found := byHier[l.Hier]
		if !found {
			continue
		}
		common++
		if l.Path == "/" {
			continue
		}
		if mp != l.Path && !strings.HasPrefix(mp, l.Path+"/") {
			return false, 0
		}
		own = true
		depth += len(l.Path)
	}
	return common > 0 && own, depth
}

// readProcStat reads /proc/PID/stat through the root.
func readProcStat(root *hostfs.Root, pid int) (procStat, error) {
	p := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := root.ReadFileLimit(p, maxProcFile)
	if err != nil {
		return procStat{}, err
	}
	st, err := parseProcStat(b)
	if err != nil {
		return procStat{}, fmt.Errorf("%s: %w", p, err)
	}
	return st, nil
}

// readProcCgroup reads /proc/PID/cgroup through the root. The paths are
// relative to the cgroup namespace of the process reading them (ours), so
// comparing two processes' files read by us is meaningful.
func readProcCgroup(root *hostfs.Root, pid int) ([]cgroupLine, error) {
	p := fmt.Sprintf("/proc/%d/cgroup", pid)
	b, err := root.ReadFileLimit(p, maxProcFile)
	if err != nil {
		return nil, err
	}
	ls, err := parseProcCgroup(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return ls, nil
}

// processGone tells "this root shows no such process" (true) from "this
// capture never looked" (false) for a failed read of /proc/PID.
func processGone(root *hostfs.Root, pid int, err error) bool {
	return errors.Is(err, fs.ErrNotExist) && root.Covers(fmt.Sprintf("/proc/%d", pid))
}

// parsePID parses a decimal PID in the kernel's range.
func parsePID(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("PID %q is not a decimal number", clip(s))
	}
	if n == 0 || n > maxPID {
		return 0, fmt.Errorf("PID %d is outside 1..%d", n, maxPID)
	}
	return int(n), nil
}

// clip keeps at most 64 bytes of s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
