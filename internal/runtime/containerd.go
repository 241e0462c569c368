package runtime

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// containerd keeps one bundle directory per task under its runtime's state
// directory, STATE/NAMESPACE/ID (core/runtime/v2/bundle.go NewBundle; the
// v2 task plugin's state is /run/containerd/io.containerd.runtime.v2.task,
// cmd/containerd/server/server.go PropertyStateDir). The bundle holds the
// OCI config.json, init.pid once the task runs (the runc shim's
// process.InitPidFile, cmd/containerd-shim-runc-v2/process/utils.go), and
// options.json with the runc shim's options, among them the runc binary
// and the runc --root it uses when not the default
// (cmd/containerd-shim-runc-v2/runc/container.go ReadOptions). containerd
// before 2.0 also had the v1 linux runtime, whose bundles were laid out
// the same way under io.containerd.runtime.v1.linux.
var taskBundleRoots = []string{
	"/run/containerd/io.containerd.runtime.v2.task",
	"/run/containerd/io.containerd.runtime.v1.linux",
}

// taskBundle is what one containerd bundle directory says.
type taskBundle struct {
	Dir        string
	Spec       *specs.Spec // nil when config.json could not be read
	PID        int         // from init.pid; 0 when absent
	RuncRoot   string      // options.json "root": the runc --root is RuncRoot/NAMESPACE
	BinaryName string      // options.json "binary_name": the OCI runtime the shim runs
	Errors     []error
}

// shimOptions is the part of the runc shim's options.json (the Options
// message of containerd's api/types/runc/options/oci.proto, JSON-encoded)
// that the lookup reads.
type shimOptions struct {
	BinaryName string `json:"binary_name"`
	Root       string `json:"root"`
}

func parseShimOptions(b []byte) (shimOptions, error) {
	var o shimOptions
	err := json.Unmarshal(b, &o)
	return o, err
}

func redactShimOptions(b []byte) []byte {
	o, err := parseShimOptions(b)
	if err != nil {
		return nil
	}
	out, _ := json.Marshal(&o)
	return out
}

// readTaskBundle reads a containerd bundle directory. ok is false when
// the directory holds neither a config.json nor an init.pid (not a bundle,
// or one being created or deleted).
func readTaskBundle(root *hostfs.Root, dir string) (b taskBundle, ok bool) {
	b.Dir = dir
	cfg := path.Join(dir, "config.json")
	s, err := ReadSpec(root, cfg)
	switch {
	case err == nil:
		b.Spec, ok = s, true
	case absent(err):
	default:
		ok = true
		b.Errors = append(b.Errors, err)
	}
	pidPath := path.Join(dir, "init.pid")
	raw, err := root.ReadFileLimit(pidPath, 64)
	switch {
	case err == nil:
		ok = true
		if b.PID, err = parsePIDFile(raw); err != nil {
			b.Errors = append(b.Errors, &fs.PathError{Op: "parse", Path: pidPath, Err: err})
		}
	case absent(err):
	default:
		ok = true
		b.Errors = append(b.Errors, err)
	}
	if !ok {
		return b, false
	}
	optPath := path.Join(dir, "options.json")
	raw, err = root.ReadFileRedacted(optPath, MaxStateSize, redactShimOptions)
	switch {
	case err == nil:
		o, perr := parseShimOptions(raw)
		if perr != nil {
			b.Errors = append(b.Errors, &fs.PathError{Op: "parse", Path: optPath, Err: perr})
		}
		b.RuncRoot, b.BinaryName = o.Root, o.BinaryName
	case absent(err):
	default:
		b.Errors = append(b.Errors, err)
	}
	return b, true
}

// absent: the path is not there, or a component of it is not a directory
// (a stray file where a container's directory would be).
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir)
}
