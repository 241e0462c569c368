package dra

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// installContainerd puts a containerd of release ver (a binary without Go
// build information, so dpkg gives the release) and its config.toml
// into a node tree.
func installContainerd(t testing.TB, dir, ver, config string) {
	t.Helper()
	write(t, filepath.Join(dir, "usr/bin/containerd"), "#!/bin/sh\n")
	write(t, filepath.Join(dir, "var/lib/dpkg/status"), "Package: containerd\nStatus: install ok installed\nVersion: "+ver+"\n\n")
	if config != "" {
		write(t, filepath.Join(dir, "etc/containerd/config.toml"), config)
	}
}

const cdiOff = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = false\n"

// A live registration alone makes a driver the runtime must serve: with
// no prepared claim and the driver's spec in /var/run/cdi, containerd
// 1.7 with enable_cdi = false does not.
func TestRuntimeCDIRegisteredDriver(t *testing.T) {
	dn := newDRANode(t)
	if err := os.Remove(filepath.Join(dn.kdir, StateName)); err != nil {
		t.Fatal(err)
	}
	installContainerd(t, dn.dir, "1.7.24~ds1-1", cdiOff)
	n := read(t, dn.dir, Options{})
	rc := n.RuntimeCDI
	if rc == nil || strings.Join(rc.Drivers, ",") != driverName || len(rc.Runtimes) != 1 || rc.NotFound != "" {
		t.Fatalf("runtime CDI %+v", rc)
	}
	if len(rc.Specs) != 1 || rc.Specs[0].Version != "0.6.0" || !strings.Contains(rc.Specs[0].By, "vendor k8s."+driverName) {
		t.Errorf("specs %+v", rc.Specs)
	}
	s := rc.Serve(rc.Runtimes[0], driverName)
	if s.Answer != NoCDI || !strings.Contains(s.Why, "containerd 1.7.24") || !strings.Contains(s.Why, "enable_cdi = false in /etc/containerd/config.toml") {
		t.Errorf("%+v", s)
	}

	// The same containerd with CDI on (1.7's default is off: it must be
	// set) serves it; a 1.7.0 (CDI library v0.5.4) does not load 0.6.0.
	installContainerd(t, dn.dir, "1.7.24~ds1-1", strings.Replace(cdiOff, "false", "true", 1))
	n = read(t, dn.dir, Options{})
	if s := n.RuntimeCDI.Serve(n.RuntimeCDI.Runtimes[0], driverName); s.Answer != Serves {
		t.Errorf("enable_cdi = true: %+v", s)
	}
	installContainerd(t, dn.dir, "1.7.0~ds1-1", strings.Replace(cdiOff, "false", "true", 1))
	n = read(t, dn.dir, Options{})
	if s := n.RuntimeCDI.Serve(n.RuntimeCDI.Runtimes[0], driverName); s.Answer != TooOld || s.Spec == nil || s.Spec.Version != "0.6.0" {
		t.Errorf("containerd 1.7.0: %+v", s)
	}
	// No config and 1.7's default: off, from the release.
	os.Remove(filepath.Join(dn.dir, "etc/containerd/config.toml"))
	n = read(t, dn.dir, Options{})
	if s := n.RuntimeCDI.Serve(n.RuntimeCDI.Runtimes[0], driverName); s.Answer != NoCDI || !strings.Contains(s.Why, "1.x default") {
		t.Errorf("containerd 1.7 default: %+v", s)
	}
	// An unreadable config (a directory) is not judged, even where the
	// release's default would say on.
	installContainerd(t, dn.dir, "2.1.4~ds1-1", "")
	if err := os.MkdirAll(filepath.Join(dn.dir, "etc/containerd/config.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	n = read(t, dn.dir, Options{})
	if s := n.RuntimeCDI.Serve(n.RuntimeCDI.Runtimes[0], driverName); s.Answer != AnswerUnknown || !strings.Contains(s.Why, "could not be read") {
		t.Errorf("unreadable config: %+v", s)
	}
}

// Which runtimes count: the CRI ones; none found is said, not guessed;
// no DRA driver, nothing read.
func TestRuntimeCDIWhichRuntimes(t *testing.T) {
	dn := newDRANode(t)
	n := read(t, dn.dir, Options{})
	if rc := n.RuntimeCDI; rc == nil || len(rc.Runtimes) != 0 || !strings.Contains(rc.NotFound, "/usr/bin") {
		t.Fatalf("no runtime: %+v", rc)
	}
	// dockerd without cri-dockerd and podman are no CRI runtime.
	write(t, filepath.Join(dn.dir, "usr/bin/dockerd"), "#!/bin/sh\n")
	write(t, filepath.Join(dn.dir, "usr/bin/podman"), "#!/bin/sh\n")
	n = read(t, dn.dir, Options{})
	if rc := n.RuntimeCDI; len(rc.Runtimes) != 0 || rc.NotFound == "" {
		t.Errorf("dockerd and podman: %+v", rc)
	}
	write(t, filepath.Join(dn.dir, "usr/bin/cri-dockerd"), "#!/bin/sh\n")
	n = read(t, dn.dir, Options{})
	if rc := n.RuntimeCDI; len(rc.Runtimes) != 1 || rc.Runtimes[0].Name != "dockerd" {
		t.Errorf("dockerd behind cri-dockerd: %+v", rc)
	}

	bare := shortTemp(t)
	installContainerd(t, bare, "1.7.24~ds1-1", cdiOff)
	os.MkdirAll(filepath.Join(bare, "var/lib/kubelet/plugins_registry"), 0o755)
	if n := read(t, bare, Options{}); n.RuntimeCDI != nil || len(n.ActiveDrivers()) != 0 {
		t.Errorf("no DRA driver: %+v", n.RuntimeCDI)
	}
}
