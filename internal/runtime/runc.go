package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxStateSize bounds a runtime state file. runc's state.json holds the
// container's whole libcontainer config (mounts, devices, a seccomp
// profile of a few hundred syscalls): tens of KiB; crun's and CRI-O's are
// under one KiB.
const MaxStateSize = 4 << 20

// The file names of the OCI runtimes' state, inside <root>/<id>/:
//   - runc: state.json, and exec.fifo while the container is created but
//     not started (libcontainer/factory_linux.go stateFilename,
//     execFifoFilename; libcontainer/container_linux.go refreshState);
//   - crun: status, and the same exec.fifo (src/libcrun/status.c
//     get_state_directory_status_file, get_exec_fifo_path).
const (
	runcStateFile = "state.json"
	crunStateFile = "status"
	execFifoFile  = "exec.fifo"
)

// ociState is what a low-level runtime's state file says about one
// container: the facts the lookup uses and nothing else.
type ociState struct {
	Format    Runtime // Runc or Crun
	ID        string  // as the file names it (runc only)
	PID       int
	StartTime uint64 // of the init process, clock ticks after boot; 0: not recorded
	Created   time.Time
	Bundle    string
	// Labels are runc's config labels: "bundle=DIR" and one "KEY=VALUE"
	// per spec annotation (libcontainer/specconv/spec_linux.go
	// CreateLibcontainerConfig), the annotations when config.json cannot
	// be read.
	Labels map[string]string
	// CgroupPaths (runc): controller -> the host directory of the
	// container's cgroup; "" is the unified (v2) hierarchy
	// (libcontainer/container_linux.go State.CgroupPaths).
	CgroupPaths map[string]string
	// CgroupPath (crun): the cgroup path crun made, relative to the
	// hierarchy's root.
	CgroupPath string
	// Warnings are fields that did not parse while the rest did.
	Warnings []error
}

// runcStateJSON is the part of runc's state.json (libcontainer State,
// libcontainer/container_linux.go) that the lookup reads. Everything else
// (the libcontainer config of mounts, devices, seccomp, hooks with their
// arguments) is skipped, and a snapshot keeps only these fields.
type runcStateJSON struct {
	ID               string    `json:"id"`
	InitProcessPid   int       `json:"init_process_pid"`
	InitProcessStart flexUint  `json:"init_process_start"`
	Created          time.Time `json:"created"`
	Config           struct {
		Labels []string `json:"labels"`
	} `json:"config"`
	CgroupPaths map[string]string `json:"cgroup_paths"`
}

// flexUint is a decimal number written as a JSON number or, as runc
// before 1.0 and CRI-O write start times, a JSON string.
type flexUint uint64

func (f *flexUint) UnmarshalJSON(b []byte) error {
	s := string(bytes.TrimSpace(b))
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	if s == "" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a decimal number", clip(s))
	}
	*f = flexUint(n)
	return nil
}

// parseRuncState parses runc's state.json.
func parseRuncState(b []byte) (ociState, error) {
	var j runcStateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return ociState{}, err
	}
	if j.InitProcessPid < 0 || j.InitProcessPid > maxPID {
		return ociState{}, fmt.Errorf("init_process_pid %d is outside 0..%d", j.InitProcessPid, maxPID)
	}
	st := ociState{Format: Runc, ID: j.ID, PID: j.InitProcessPid, StartTime: uint64(j.InitProcessStart),
		Created: j.Created, CgroupPaths: j.CgroupPaths}
	if len(j.Config.Labels) > 0 {
		st.Labels = make(map[string]string, len(j.Config.Labels))
		for _, l := range j.Config.Labels {
			k, v, _ := strings.Cut(l, "=")
			st.Labels[k] = v
		}
		st.Bundle = st.Labels["bundle"]
		delete(st.Labels, "bundle")
	}
	return st, nil
}

// redactRuncState is what of a runc state.json a snapshot keeps: the
// fields parseRuncState reads, re-encoded. The rest of the libcontainer
// config is not needed to find the container and holds hooks' arguments
// and environments, where tokens live.
func redactRuncState(b []byte) []byte {
	var j runcStateJSON
	if json.Unmarshal(b, &j) != nil {
		return nil
	}
	out, err := json.Marshal(&j)
	if err != nil {
		return nil
	}
	return out
}

// crunStatusJSON is crun's status file (src/libcrun/status.c
// libcrun_write_container_status), the fields the lookup reads.
type crunStatusJSON struct {
	PID        int      `json:"pid"`
	StartTime  flexUint `json:"process-start-time"`
	CgroupPath string   `json:"cgroup-path"`
	Bundle     string   `json:"bundle"`
	Created    string   `json:"created"`
}

// parseCrunStatus parses crun's status file. A creation time that does
// not parse is a warning: the rest still finds the container.
func parseCrunStatus(b []byte) (ociState, error) {
	var j crunStatusJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return ociState{}, err
	}
	if j.PID < 0 || j.PID > maxPID {
		return ociState{}, fmt.Errorf("pid %d is outside 0..%d", j.PID, maxPID)
	}
	st := ociState{Format: Crun, PID: j.PID, StartTime: uint64(j.StartTime), Bundle: j.Bundle, CgroupPath: j.CgroupPath}
	if j.Created != "" {
		t, err := time.Parse(time.RFC3339Nano, j.Created)
		if err != nil {
			st.Warnings = append(st.Warnings, fmt.Errorf("created %q: %w", clip(j.Created), err))
		}
		st.Created = t
	}
	return st, nil
}

func redactCrunStatus(b []byte) []byte {
	var j crunStatusJSON
	if json.Unmarshal(b, &j) != nil {
		return nil
	}
	out, err := json.Marshal(&j)
	if err != nil {
		return nil
	}
	return out
}

// parsePIDFile parses a file holding one PID (containerd's init.pid,
// conmon's pidfile), with or without a trailing newline.
func parsePIDFile(b []byte) (int, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return 0, errors.New("empty")
	}
	return parsePID(string(b))
}
