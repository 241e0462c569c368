package cdi

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCheckHealthy: the NVIDIA spec on a host that has every piece.
func TestCheckHealthy(t *testing.T) {
	dir := hostTree(t, gpuHost(t, nvidiaSpec), gpuManifest, hookExec)
	res := Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
	f := mustKind(t, res.Facts, KindDeviceResolved)
	if !strings.Contains(f.Summary, "/etc/cdi/nvidia.yaml") || !strings.Contains(f.Summary, "3 device node(s), 2 mount(s), 2 hook(s), 1 env var(s)") {
		t.Errorf("resolved: %s", f.Summary)
	}
	var ev []string
	for _, e := range f.Evidence {
		ev = append(ev, e.Value)
	}
	for _, want := range []string{"deviceNode /dev/nvidiactl", "deviceNode /dev/nvidia0", "mount /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 -> ", "hook createContainer /usr/bin/nvidia-cdi-hook create-symlinks", "env NVIDIA_VISIBLE_DEVICES=void"} {
		if !strings.Contains(strings.Join(ev, "\n"), want) {
			t.Errorf("evidence lacks %q:\n%s", want, strings.Join(ev, "\n"))
		}
	}
	if n := len(res.Facts.OfKind(KindNodeOK)); n != 3 {
		t.Errorf("%d node.ok, want 3:%s", n, dump(res.Facts))
	}
	if n := len(res.Facts.OfKind(KindMountOK)); n != 2 {
		t.Errorf("%d mount.ok, want 2", n)
	}
	if n := len(res.Facts.OfKind(KindHookOK)); n != 1 { // two hooks, one program: checked once
		t.Errorf("%d hook.ok, want 1", n)
	}
	noKind(t, res.Facts, KindNodeMissing, KindNodeMismatch, KindNodeNotDevice, KindMountMissing, KindHookMissing, KindHookNotExec, KindDeviceUnresolved, KindSpecInvalid)
	node := res.Facts.OfKind(KindNodeOK)[0]
	if !strings.Contains(node.Evidence[1].Value, "c 195:255 mode 0666") {
		t.Errorf("node evidence: %+v", node.Evidence)
	}
	if len(res.Resolutions) != 1 || res.Resolutions[0].Device == nil || len(res.Resolutions[0].Device.Edits().Env) != 1 {
		t.Errorf("resolution: %+v", res.Resolutions)
	}
}

func TestCheckUnresolvableAllOnly(t *testing.T) {
	dir := hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": allOnlySpec}, gpuManifest, nil)
	res := Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
	f := mustKind(t, res.Facts, KindDeviceUnresolved)
	if !strings.HasPrefix(f.Summary, "unresolvable CDI devices nvidia.com/gpu=0") || !strings.Contains(f.Summary, `declare only "all"`) {
		t.Errorf("%s", f.Summary)
	}
	if f.Evidence[len(f.Evidence)-1].Value == "" || !strings.Contains(f.Evidence[len(f.Evidence)-1].Value, "/etc/cdi, /var/run/cdi") {
		t.Errorf("evidence should name the directories read: %+v", f.Evidence)
	}
	noKind(t, res.Facts, KindDeviceResolved, KindNodeOK)
	// "all" itself resolves.
	res = Check(openRoot(t, dir), "nvidia.com/gpu=all", Options{})
	mustKind(t, res.Facts, KindDeviceResolved)

	// No spec of that kind at all.
	res = Check(openRoot(t, dir), "amd.com/gpu=0", Options{})
	if f := mustKind(t, res.Facts, KindDeviceUnresolved); !strings.Contains(f.Summary, "no valid spec declares kind amd.com/gpu") {
		t.Error(f.Summary)
	}
	// Not a qualified name.
	res = Check(openRoot(t, dir), "gpu0", Options{})
	mustKind(t, res.Facts, KindDeviceNameInvalid)
}

func TestNodeFaults(t *testing.T) {
	root := func(t *testing.T, spec, manifest string) Facts {
		dir := hostTree(t, map[string]string{"/etc/cdi/x.yaml": spec}, manifest, nil)
		return Check(openRoot(t, dir), "vendor.com/dev=a", Options{}).Facts
	}
	spec := func(node string) string {
		return "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes:\n    - " + node + "\n"
	}
	t.Run("missing, numbers from the host", func(t *testing.T) {
		f := mustKind(t, root(t, spec("path: /dev/nvidia5"), gpuManifest), KindNodeMissing)
		if !strings.Contains(f.Summary, "the runtime refuses the container") {
			t.Error(f.Summary)
		}
	})
	t.Run("missing, minimally specified", func(t *testing.T) {
		f := mustKind(t, root(t, spec("{path: /dev/nvidia5, type: c, major: 195, minor: 5}"), gpuManifest), KindNodeMissing)
		if !strings.Contains(f.Summary, "creates the node in the container anyway") {
			t.Error(f.Summary)
		}
	})
	t.Run("other numbers", func(t *testing.T) {
		f := mustKind(t, root(t, spec("{path: /dev/nvidia0, type: c, major: 195, minor: 1}"), gpuManifest), KindNodeMismatch)
		if !strings.Contains(f.Summary, "the spec gives 195:1, host node /dev/nvidia0 is 195:0") {
			t.Error(f.Summary)
		}
	})
	t.Run("other type", func(t *testing.T) {
		f := mustKind(t, root(t, spec("{path: /dev/nvidia0, type: b}"), gpuManifest), KindNodeMismatch)
		if !strings.Contains(f.Summary, "host type mismatch (b, c)") {
			t.Error(f.Summary)
		}
	})
	t.Run("host path from hostPath", func(t *testing.T) {
		fs := root(t, spec("{path: /dev/gpu0, hostPath: /dev/nvidia0}"), gpuManifest)
		f := mustKind(t, fs, KindNodeOK)
		if !strings.Contains(f.Subject, "/dev/nvidia0") {
			t.Error(f.Subject)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		fs := root(t, spec("path: /dev/dri/by-path/card"), gpuManifest+"/dev/dri/by-path/card l ../card0\n/dev/dri/card0 c 226:0 0660 0:44\n")
		f := mustKind(t, fs, KindNodeNotDevice)
		if !strings.Contains(f.Summary, "a symlink to ../card0") || !strings.Contains(f.Summary, "refuses") {
			t.Error(f.Summary)
		}
	})
	t.Run("regular file", func(t *testing.T) {
		dir := hostTree(t, map[string]string{"/etc/cdi/x.yaml": spec("path: /dev/fake"), "/dev/fake": "x"}, "", nil)
		mustKind(t, Check(openRoot(t, dir), "vendor.com/dev=a", Options{}).Facts, KindNodeNotDevice)
	})
	t.Run("not captured", func(t *testing.T) {
		dir := hostTree(t, map[string]string{"/etc/cdi/x.yaml": spec("path: /dev/nvidia/gpu0")}, "", nil)
		f := mustKind(t, Check(openRoot(t, dir), "vendor.com/dev=a", Options{}).Facts, KindNodeUnreadable)
		if !strings.Contains(f.Summary, "does not show") {
			t.Error(f.Summary)
		}
	})
}

func TestMountAndHookFaults(t *testing.T) {
	t.Run("library mount missing", func(t *testing.T) {
		files := gpuHost(t, nvidiaSpec)
		delete(files, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15")
		dir := hostTree(t, files, gpuManifest, hookExec)
		fs := Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{}).Facts
		f := mustKind(t, fs, KindMountMissing)
		if !strings.Contains(f.Subject, "libcuda.so.550.54.15") {
			t.Error(f.Subject)
		}
		if n := len(fs.OfKind(KindMountOK)); n != 1 {
			t.Errorf("%d mount.ok", n)
		}
	})
	t.Run("hook missing", func(t *testing.T) {
		dir := hostTree(t, gpuHost(t, nvidiaSpec), gpuManifest, nil)
		fs := Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{}).Facts
		f := mustKind(t, fs, KindHookMissing)
		if !strings.Contains(f.Summary, "/usr/bin/nvidia-cdi-hook does not exist") {
			t.Error(f.Summary)
		}
	})
	t.Run("hook not executable", func(t *testing.T) {
		dir := hostTree(t, gpuHost(t, nvidiaSpec), gpuManifest, map[string]os.FileMode{"/usr/bin/nvidia-cdi-hook": 0o644})
		f := mustKind(t, Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{}).Facts, KindHookNotExec)
		if !strings.Contains(f.Summary, "mode 0644") {
			t.Error(f.Summary)
		}
	})
	t.Run("hook is a directory", func(t *testing.T) {
		dir := hostTree(t, gpuHost(t, nvidiaSpec), gpuManifest, nil)
		os.MkdirAll(filepath.Join(dir, "usr/bin/nvidia-cdi-hook"), 0o755)
		mustKind(t, Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{}).Facts, KindHookNotExec)
	})
	t.Run("mount source not captured", func(t *testing.T) {
		spec := "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    mounts: [{hostPath: /opt/vendor/lib/libx.so, containerPath: /lib/libx.so, options: [bind]}]\n"
		dir := hostTree(t, map[string]string{"/etc/cdi/x.yaml": spec}, "", nil)
		mustKind(t, Check(openRoot(t, dir), "vendor.com/dev=a", Options{}).Facts, KindMountUnreadable)
	})
	t.Run("tmpfs mount has no host path", func(t *testing.T) {
		spec := "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    mounts: [{hostPath: tmpfs, containerPath: /scratch, type: tmpfs}]\n"
		dir := hostTree(t, map[string]string{"/etc/cdi/x.yaml": spec}, "", nil)
		fs := Check(openRoot(t, dir), "vendor.com/dev=a", Options{}).Facts
		noKind(t, fs, KindMountMissing, KindMountOK, KindMountUnreadable)
	})
	t.Run("net device", func(t *testing.T) {
		spec := "cdiVersion: 1.1.0\nkind: vendor.com/nic\ndevices:\n- name: a\n  containerEdits:\n    netDevices: [{hostInterfaceName: ens5f0, name: net1}]\n- name: b\n  containerEdits:\n    netDevices: [{hostInterfaceName: eth9, name: net1}]\n"
		dir := hostTree(t, map[string]string{"/etc/cdi/x.yaml": spec, "/sys/class/net/ens5f0/address": "00:11:22:33:44:55\n"}, "", nil)
		mustKind(t, Check(openRoot(t, dir), "vendor.com/nic=a", Options{}).Facts, KindNetDeviceOK)
		mustKind(t, Check(openRoot(t, dir), "vendor.com/nic=b", Options{}).Facts, KindNetDeviceMissing)
	})
}

// TestValidateEveryPiece: validate checks each spec's global edits once
// and each device's own.
func TestValidateEveryPiece(t *testing.T) {
	files := gpuHost(t, nvidiaSpec)
	files["/var/run/cdi/broken.yaml"] = "cdiVersion: 0.5.0\nkind: vendor.com/dev\ndevices:\n- name: a\n  containerEdits:\n    deviceNodes: [{path: /dev/vendor0}]\n"
	files["/var/run/cdi/bad.yaml"] = "{"
	dir := hostTree(t, files, gpuManifest, hookExec)
	res := Validate(openRoot(t, dir), Options{})
	if n := len(res.Facts.OfKind(KindSpecLoaded)); n != 2 {
		t.Errorf("%d spec.loaded:%s", n, dump(res.Facts))
	}
	mustKind(t, res.Facts, KindSpecInvalid)
	miss := mustKind(t, res.Facts, KindNodeMissing)
	if miss.Subject != "vendor.com/dev=a: /dev/vendor0" {
		t.Errorf("missing node subject %q", miss.Subject)
	}
	// nvidiactl and nvidia-uvm once (global), nvidia0 once per device (3).
	if n := len(res.Facts.OfKind(KindNodeOK)); n != 5 {
		t.Errorf("%d node.ok, want 5", n)
	}
	if n := len(res.Facts.OfKind(KindHookOK)); n != 1 { // two hooks, one program: checked once
		t.Errorf("%d hook.ok, want 1", n)
	}
	mustKind(t, res.Facts, KindRuntimeNone)
}

// TestRunCDIDir: /run/cdi is the same directory as /var/run/cdi where
// /var/run links to /run (even before /var/run/cdi resolves), and a
// directory of its own, whose specs nobody reads, where it does not.
func TestRunCDIDir(t *testing.T) {
	linked := hostTree(t, map[string]string{"/run/cdi/dra.yaml": allOnlySpec}, "", nil)
	os.RemoveAll(filepath.Join(linked, "var/run"))
	os.Symlink("../run", filepath.Join(linked, "var/run"))
	res := Validate(openRoot(t, linked), Options{})
	noKind(t, res.Facts, KindSpecDirUnused)
	mustKind(t, res.Facts, KindSpecLoaded)

	apart := hostTree(t, map[string]string{"/run/cdi/dra.yaml": allOnlySpec}, "", nil)
	res = Validate(openRoot(t, apart), Options{})
	f := mustKind(t, res.Facts, KindSpecDirUnused)
	if f.Evidence[0].Path != "/run/cdi/dra.yaml" {
		t.Errorf("%+v", f)
	}
	noKind(t, res.Facts, KindSpecLoaded)

	// Only the directory: before any spec is written, nothing to say.
	empty := hostTree(t, nil, "", nil)
	os.MkdirAll(filepath.Join(empty, "run/cdi"), 0o755)
	noKind(t, Validate(openRoot(t, empty), Options{}).Facts, KindSpecDirUnused)
}

func TestUnreadableInputs(t *testing.T) {
	t.Run("spec directory in a symlink loop", func(t *testing.T) {
		dir := hostTree(t, map[string]string{"/var/run/cdi/a.yaml": allOnlySpec}, "", nil)
		os.RemoveAll(filepath.Join(dir, "etc/cdi"))
		os.Symlink("cdi", filepath.Join(dir, "etc/cdi"))
		res := Validate(openRoot(t, dir), Options{})
		f := mustKind(t, res.Facts, KindSpecDirUnread)
		if f.Subject != "/etc/cdi" {
			t.Errorf("%+v", f)
		}
		// Not the runtime's problem as far as we know: the later
		// directory is still read.
		mustKind(t, res.Facts, KindSpecLoaded)
	})
	t.Run("net device not captured", func(t *testing.T) {
		spec := "cdiVersion: 1.1.0\nkind: vendor.com/nic\ndevices:\n- name: a\n  containerEdits:\n    netDevices: [{hostInterfaceName: ens5f0, name: net1}]\n"
		dir := hostTree(t, map[string]string{"/etc/cdi/x.yaml": spec}, "", nil)
		mustKind(t, Check(openRoot(t, dir), "vendor.com/nic=a", Options{}).Facts, KindNetDeviceUnread)
	})
	t.Run("dpkg database unreadable", func(t *testing.T) {
		dir := hostTree(t, map[string]string{"/etc/cdi/nvidia.yaml": spec070}, gpuManifest, nil)
		os.MkdirAll(filepath.Join(dir, "var/lib/dpkg"), 0o755)
		if err := syscall.Mkfifo(filepath.Join(dir, DpkgStatus), 0o644); err != nil {
			t.Skip(err)
		}
		installBinary(t, dir, "/usr/bin/containerd", fakeRuntime(t, "", "", ""))
		res := Check(openRoot(t, dir), "nvidia.com/gpu=0", Options{})
		f := mustKind(t, res.Facts, KindRuntimeUnknown)
		if f.Subject != DpkgStatus && !strings.Contains(dump(res.Facts), DpkgStatus) {
			t.Errorf("%s", dump(res.Facts))
		}
		mustKind(t, res.Facts, KindVersionUnknown)
	})
}
