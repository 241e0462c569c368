package runtime

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// CRI-O (and Podman) keep containers in containers/storage: each has a
// run directory RUNROOT/DRIVER-containers/ID/userdata, erased on reboot,
// and a persistent one under GRAPHROOT (containers/storage store.go
// ContainerRunDirectory, ContainerDirectory; the defaults of
// storage.conf are /run/containers/storage and /var/lib/containers/storage).
// CRI-O writes the container's config.json into both, runs the OCI runtime
// with the run directory as the bundle, has conmon write the init PID to
// BUNDLE/pidfile (server/container_create.go, internal/oci/runtime_oci.go
// CreateContainer), and saves its own view of the container, an OCI state
// with CRI-O's fields, to the persistent directory's state.json
// (internal/oci/container.go StatePath, ContainerState).
const (
	storageRunRoot   = "/run/containers/storage"
	storageGraphRoot = "/var/lib/containers/storage"
)

// storageContainer is what containers/storage's directories say about one
// container.
type storageContainer struct {
	RunDir    string // the bundle: RUNROOT/DRIVER-containers/ID/userdata
	Spec      *specs.Spec
	PID       int // conmon's pidfile; 0 when absent
	State     *crioState
	StatePath string
	Errors    []error
}

// crioState is CRI-O's state.json, the part the lookup reads.
type crioState struct {
	specs.State
	Created time.Time
	InitPID int
	// InitStartTime is the init process's start time in clock ticks (field
	// 22 of /proc/PID/stat), as CRI-O has written it since it became a
	// string; 0 when absent, or written as the older number (the ctime of
	// /proc/PID in seconds, which is not comparable).
	InitStartTime uint64
}

type crioStateJSON struct {
	specs.State
	Created       time.Time       `json:"created"`
	InitPid       int             `json:"initPid,omitempty"`
	InitStartTime json.RawMessage `json:"initStartTime,omitempty"`
}

// parseCRIOState parses CRI-O's state.json, or any OCI state document
// (runtime-spec runtime.md "State": what runtimes give hooks on stdin).
func parseCRIOState(b []byte) (crioState, error) {
	var j crioStateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return crioState{}, err
	}
	if j.Pid < 0 || j.Pid > maxPID || j.InitPid < 0 || j.InitPid > maxPID {
		return crioState{}, fmt.Errorf("pid %d / initPid %d outside 0..%d", j.Pid, j.InitPid, maxPID)
	}
	st := crioState{State: j.State, Created: j.Created, InitPID: j.InitPid}
	if len(j.InitStartTime) > 0 && j.InitStartTime[0] == '"' {
		var s string
		if err := json.Unmarshal(j.InitStartTime, &s); err != nil {
			return crioState{}, fmt.Errorf("initStartTime: %w", err)
		}
		if s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return crioState{}, fmt.Errorf("initStartTime %q is not a number of clock ticks", clip(s))
			}
			st.InitStartTime = n
		}
	}
	return st, nil
}

func redactCRIOState(b []byte) []byte {
	var j crioStateJSON
	if json.Unmarshal(b, &j) != nil {
		return nil
	}
	out, err := json.Marshal(&j)
	if err != nil {
		return nil
	}
	return out
}

// readStorageContainer reads one container's storage directories. ok is
// false when the run directory has no config.json: containers/storage
// also holds containers of image builds, which no runtime runs.
func readStorageContainer(root *hostfs.Root, driverDir, id string) (c storageContainer, ok bool) {
	c.RunDir = path.Join(storageRunRoot, driverDir, id, "userdata")
	s, err := ReadSpec(root, path.Join(c.RunDir, "config.json"))
	switch {
	case err == nil:
		c.Spec = s
	case absent(err):
		return c, false
	default:
		c.Errors = append(c.Errors, err)
	}
	pidPath := path.Join(c.RunDir, "pidfile")
	raw, err := root.ReadFileLimit(pidPath, 64)
	switch {
	case err == nil:
		if c.PID, err = parsePIDFile(raw); err != nil {
			c.Errors = append(c.Errors, &fs.PathError{Op: "parse", Path: pidPath, Err: err})
		}
	case absent(err):
	default:
		c.Errors = append(c.Errors, err)
	}
	statePath := path.Join(storageGraphRoot, driverDir, id, "userdata", "state.json")
	raw, err = root.ReadFileRedacted(statePath, MaxStateSize, redactCRIOState)
	switch {
	case err == nil:
		st, perr := parseCRIOState(raw)
		if perr != nil {
			c.Errors = append(c.Errors, &fs.PathError{Op: "parse", Path: statePath, Err: perr})
			break
		}
		c.State, c.StatePath = &st, statePath
		if st.ID != "" && st.ID != id {
			c.Errors = append(c.Errors, fmt.Errorf("%s names container %q, its directory %q", statePath, clip(st.ID), id))
		}
	case absent(err):
	default:
		c.Errors = append(c.Errors, err)
	}
	return c, true
}
