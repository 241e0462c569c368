package deviceplugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"

	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/cdi"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// SpecFileName is the CDI spec file a CDI resource writes in the spec
// directory: accel-doctor-<vendor>-<class>.json (the CDI library's
// GenerateSpecName naming, prefixed with who wrote it).
func SpecFileName(c *CDIConfig) string {
	return "accel-doctor-" + cdilib.GenerateSpecName(c.Vendor, c.Class) + ".json"
}

// buildSpec is the CDI spec of a resource's devices: one CDI device per
// device that has nodes, named by its ID, with its own nodes; the shared
// nodes, mounts and env of the config as the spec's global edits, which
// the CDI library applies whenever any of its devices is injected
// (pkg/cdi Spec.edits). A device without nodes (its sysfs entry gone,
// or a driver that made none) is left out: the spec would be invalid
// with it ("device has no edits"); evaluate marks it Unhealthy, so the
// kubelet does not allocate it, and Allocate refuses it.
func buildSpec(rc *ResourceConfig, devs []*Device) (*cdispec.Spec, error) {
	s := &cdispec.Spec{Kind: rc.CDI.Kind()}
	perms := rc.Container.Permissions
	shared := map[string]*cdispec.DeviceNode{}
	for _, d := range devs {
		var nodes []*cdispec.DeviceNode
		for _, n := range d.Nodes {
			nodes = append(nodes, cdiNode(n, perms))
		}
		if len(nodes) == 0 {
			continue
		}
		s.Devices = append(s.Devices, cdispec.Device{Name: d.ID, ContainerEdits: cdispec.ContainerEdits{DeviceNodes: nodes}})
		for _, n := range d.Shared {
			shared[n.Path] = cdiNode(n, perms)
		}
	}
	for _, n := range rc.Container.DeviceNodes {
		ctr := cmpOr(n.ContainerPath, n.HostPath)
		shared[ctr] = &cdispec.DeviceNode{Path: ctr, HostPath: n.HostPath, Permissions: perms}
	}
	keys := make([]string, 0, len(shared))
	for k := range shared {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s.ContainerEdits.DeviceNodes = append(s.ContainerEdits.DeviceNodes, shared[k])
	}
	for _, m := range rc.Container.Mounts {
		opts := []string{"bind", "rw"}
		if m.ReadOnly {
			opts = []string{"bind", "ro"}
		}
		s.ContainerEdits.Mounts = append(s.ContainerEdits.Mounts, &cdispec.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, Options: opts})
	}
	envs := make([]string, 0, len(rc.Container.Env))
	for k, v := range rc.Container.Env {
		envs = append(envs, k+"="+v)
	}
	sort.Strings(envs)
	s.ContainerEdits.Env = envs
	v, err := cdilib.MinimumRequiredVersion(s)
	if err != nil {
		return nil, err
	}
	s.Version = v
	return s, nil
}

func cdiNode(n Node, perms string) *cdispec.DeviceNode {
	dn := &cdispec.DeviceNode{Path: n.Path, Permissions: perms}
	if n.Known {
		t := "c"
		if n.Type == hostfs.TypeBlock {
			t = "b"
		}
		dn.Type, dn.Major, dn.Minor = t, int64(n.Major), int64(n.Minor)
	}
	return dn
}

// writeSpec writes the resource's CDI spec when it changed: validated by
// the CDI library's own parser first, then written to a temporary file
// and renamed over the old one, so that a runtime resolving a name at
// that moment reads the old spec or the new one, never half of one. It
// returns the IDs of the devices the spec declares: none when no device
// has a node (a spec without devices is invalid, so nothing is written,
// and a spec left from before is not vouched for).
func (r *resource) writeSpec(devs []*Device) (map[string]bool, error) {
	s, err := buildSpec(r.cfg, devs)
	if err != nil {
		return nil, err
	}
	declared := make(map[string]bool, len(s.Devices))
	for _, d := range s.Devices {
		declared[d.Name] = true
	}
	if len(s.Devices) == 0 {
		if len(devs) == 0 {
			return declared, nil // Run logs a resource that selects nothing (NoDeviceLog)
		}
		r.plugin.opts.Logger.Warn("CDI spec not written: no device of the resource has a device node", "resource", r.cfg.Name, "devices", len(devs))
		return declared, nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	if string(b) == r.specSig {
		return declared, nil
	}
	if _, err := cdi.ParseSpec(b, SpecFileName(r.cfg.CDI)); err != nil {
		return nil, fmt.Errorf("the spec built is invalid: %w", err)
	}
	dir := r.plugin.cfg.CDISpecDir
	root := r.plugin.opts.Root
	if !root.IsLive() {
		dir = filepath.Join(root.Dir(), dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	final := filepath.Join(dir, SpecFileName(r.cfg.CDI))
	tmp, err := os.CreateTemp(dir, ".accel-doctor-spec-*.tmp") // not .json/.yaml: the library ignores it
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return nil, err
	}
	r.specSig = string(b)
	r.plugin.opts.Logger.Info("CDI spec written", "resource", r.cfg.Name, "path", path.Join(r.plugin.cfg.CDISpecDir, SpecFileName(r.cfg.CDI)), "devices", len(s.Devices))
	return declared, nil
}
