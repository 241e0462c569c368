package cdi

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// runcCreate injects a CDI device into a busybox bundle's spec with the
// CDI library's own cache, as containerd and CRI-O do, then runs
// `runc create` on it. It returns the injection error, or runc's output
// and error; the container and its cgroup are removed at the end.
func runcCreate(t *testing.T, specDir, name string) (injectErr error, out string, runErr error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runc containers need root")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc is not installed (apt-get install runc)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("busybox-static is not installed (apt-get install busybox-static)")
	}
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp", "lib"} {
		os.MkdirAll(filepath.Join(rootfs, d), 0o755)
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(rootfs, "bin/busybox"), b, 0o755)
	os.Symlink("busybox", filepath.Join(rootfs, "bin/sleep"))
	if o, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, o)
	}
	cfg := filepath.Join(bundle, "config.json")
	raw, _ := os.ReadFile(cfg)
	var s specs.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s.Process.Terminal = false
	s.Process.Args = []string{"/bin/sleep", "300"}
	id := fmt.Sprintf("accel-doctor-cdi-test-%d-%x", os.Getpid(), rand.Uint32())
	s.Linux.CgroupsPath = "/" + id

	cache, _ := cdilib.NewCache(cdilib.WithSpecDirs(specDir), cdilib.WithAutoRefresh(false))
	if _, err := cache.InjectDevices(&s, name); err != nil {
		return err, "", nil
	}
	raw, _ = json.MarshalIndent(&s, "", "  ")
	os.WriteFile(cfg, raw, 0o644)
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if exec.Command(runc, "delete", "--force", id).Run() == nil {
				break
			}
			if o, _ := exec.Command(runc, "state", id).CombinedOutput(); strings.Contains(string(o), "does not exist") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// The created container keeps runc's stdio: a pipe would hold
	// CombinedOutput until the container exits, so the output goes to a
	// file; a deadline bounds a runc that hangs.
	errFile, err := os.Create(filepath.Join(bundle, "runc.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runc, "create", "--bundle", bundle, id)
	cmd.Stdout, cmd.Stderr = errFile, errFile
	runErr = cmd.Run()
	o, _ := os.ReadFile(errFile.Name())
	return nil, string(o), runErr
}

// TestRuncConfirmsTheFacts holds the facts' claims about what the
// runtime does to real runc: a CDI device whose pieces the host has is
// created; a missing hook program, a non-executable one and a missing
// mount source each fail the container's creation; a node missing on the
// host fails injection unless the spec gives its type and numbers, in
// which case runc creates it anyway.
func TestRuncConfirmsTheFacts(t *testing.T) {
	specDir := t.TempDir()
	noexec := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	os.WriteFile(noexec, []byte("#!/bin/sh\nexit 0\n"), 0o644)
	okHook := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	os.WriteFile(okHook, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	// The healthy device's mount is a file every machine has (this test
	// binary), whatever is installed.
	lib, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	devices := map[string]string{
		"healthy":     fmt.Sprintf("deviceNodes: [{path: /dev/accel0, hostPath: /dev/null}]\n    mounts: [{hostPath: %s, containerPath: /lib/libaccel.so, options: [ro, nosuid, nodev, bind]}]\n    hooks: [{hookName: createContainer, path: %s}]", lib, okHook),
		"no-hook":     "deviceNodes: [{path: /dev/accel0, hostPath: /dev/null}]\n    hooks: [{hookName: createContainer, path: /nonexistent/nvidia-cdi-hook}]",
		"noexec-hook": fmt.Sprintf("deviceNodes: [{path: /dev/accel0, hostPath: /dev/null}]\n    hooks: [{hookName: createContainer, path: %s}]", noexec),
		"no-mount":    "mounts: [{hostPath: /nonexistent/libcuda.so.1, containerPath: /lib/libcuda.so.1, options: [ro, bind]}]",
		"no-node":     "deviceNodes: [{path: /dev/accel-missing-0}]",
		"no-node-min": "deviceNodes: [{path: /dev/accel-missing-0, type: c, major: 1, minor: 3}]",
	}
	var spec strings.Builder
	spec.WriteString("cdiVersion: 0.5.0\nkind: accel-doctor.test/dev\ndevices:\n")
	for n, e := range devices {
		fmt.Fprintf(&spec, "- name: %s\n  containerEdits:\n    %s\n", n, e)
	}
	if err := os.WriteFile(filepath.Join(specDir, "test.yaml"), []byte(spec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	live := hostfs.MustNew("/")
	for _, c := range []struct {
		dev        string
		kind       Kind // our fact
		injectFail bool
		runcFail   bool
	}{
		{"healthy", "", false, false},
		{"no-hook", KindHookMissing, false, true},
		{"noexec-hook", KindHookNotExec, false, true},
		{"no-mount", KindMountMissing, false, true},
		{"no-node", KindNodeMissing, true, false},
		{"no-node-min", KindNodeMissing, false, false},
	} {
		t.Run(c.dev, func(t *testing.T) {
			name := "accel-doctor.test/dev=" + c.dev
			res := Check(live, name, Options{Dirs: []string{specDir}})
			mustKind(t, res.Facts, KindDeviceResolved)
			bad := Facts{}
			for _, k := range []Kind{KindHookMissing, KindHookNotExec, KindMountMissing, KindNodeMissing, KindNodeMismatch, KindNodeNotDevice} {
				bad = append(bad, res.Facts.OfKind(k)...)
			}
			switch {
			case c.kind == "" && len(bad) > 0:
				t.Errorf("healthy device has problems:%s", dump(bad))
			case c.kind != "":
				mustKind(t, res.Facts, c.kind)
			}
			injErr, out, runErr := runcCreate(t, specDir, name)
			if (injErr != nil) != c.injectFail {
				t.Errorf("injection error %v, want failure %v", injErr, c.injectFail)
			}
			if injErr != nil {
				if f := mustKind(t, res.Facts, KindNodeMissing); !strings.Contains(injErr.Error(), "failed to stat CDI host device") || !strings.Contains(f.Summary, "failed to stat CDI host device") {
					t.Errorf("library: %v; ours: %s", injErr, f.Summary)
				}
				return
			}
			t.Logf("runc create: %v: %s", runErr, strings.TrimSpace(out))
			if (runErr != nil) != c.runcFail {
				t.Errorf("runc create: %v, want failure %v:\n%s", runErr, c.runcFail, out)
			}
		})
	}
}
