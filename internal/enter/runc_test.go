package enter

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

func TestMain(m *testing.M) {
	// Probe re-executes this test binary as its child.
	if TrampolineMain() {
		return
	}
	os.Exit(m.Run())
}

// accelDoctor is the static accel-doctor, to run inside the test
// containers (the test's own rootfs; the product never copies it).
func accelDoctor(t testing.TB) string {
	t.Helper()
	return filepath.Join(testbin.Dir(t, "../..", testbin.Options{Static: true, Packages: []string{"./cmd/accel-doctor"}}), "accel-doctor")
}

type container struct {
	id, bundle string
	pid        int
}

func ptr[T any](v T) *T { return &v }

// worldDir is a temporary directory every uid may traverse (t.TempDir's
// are 0700, which a user-namespaced container's root cannot enter).
func worldDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "accel-doctor-enter-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// startContainer runs a real runc container (busybox-static rootfs, with
// accel-doctor in it as /accel-doctor) and removes it, and so its
// cgroups, when the test ends, whatever happens.
func startContainer(t testing.TB, edit func(*specs.Spec)) *container {
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
	ad := accelDoctor(t)
	bundle := worldDir(t)
	rootfs := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for src, dst := range map[string]string{"/bin/busybox": "bin/busybox", ad: "accel-doctor"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rootfs, dst), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range []string{"sh", "sleep", "cat"} {
		os.Symlink("busybox", filepath.Join(rootfs, "bin", app))
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v: %s", err, out)
	}
	specPath := filepath.Join(bundle, "config.json")
	raw, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	s.Process.Terminal = false
	s.Process.Args = []string{"/bin/sleep", "300"}
	s.Root.Readonly = true
	c := &container{id: fmt.Sprintf("accel-doctor-enter-%d-%x", os.Getpid(), rand.Uint32()), bundle: bundle}
	s.Linux.CgroupsPath = "/" + c.id
	if edit != nil {
		edit(&s)
	}
	raw, _ = json.MarshalIndent(&s, "", "  ")
	if err := os.WriteFile(specPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command(runc, "kill", c.id, "KILL").Run()
		for i := 0; i < 100; i++ {
			if exec.Command(runc, "delete", "--force", c.id).Run() == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, d := range []string{"/sys/fs/cgroup/devices/" + c.id, "/sys/fs/cgroup/unified/" + c.id, "/sys/fs/cgroup/" + c.id} {
			if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
				t.Errorf("cgroup %s left behind", d)
			}
		}
	})
	errFile, err := os.Create(filepath.Join(bundle, "runc.err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	pidFile := filepath.Join(bundle, "pid")
	run := exec.Command(runc, "run", "--detach", "--bundle", bundle, "--pid-file", pidFile, c.id)
	run.Stdout, run.Stderr = errFile, errFile
	if err := run.Run(); err != nil {
		msg, _ := os.ReadFile(errFile.Name())
		t.Fatalf("runc run: %v: %s", err, msg)
	}
	pb, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if c.pid, err = strconv.Atoi(strings.TrimSpace(string(pb))); err != nil {
		t.Fatal(err)
	}
	// runc run --detach may return before its init has exec'd the
	// container's process (it is "runc init" until then, with runc's
	// environment): wait for the process itself.
	for i := 0; ; i++ {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.pid))
		if strings.HasPrefix(string(b), "/bin/sleep\x00") {
			break
		}
		if i == 500 {
			t.Fatalf("container process %d is still %q", c.pid, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

// inside runs accel-doctor's probe in the container with runc exec (the
// container's own process context, set up by runc) and returns what it
// saw.
func (c *container) inside(t *testing.T) *probe.Report {
	t.Helper()
	out, err := exec.Command("runc", "exec", c.id, "/accel-doctor", "probe", "--facts", "--no-libraries", "--termination-log", "").Output()
	var r probe.Report
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatalf("runc exec probe: %v, %v: %s", err, jerr, out)
	}
	return &r
}

// errnos maps each probed node to its open's errno name ("OK").
func errnos(r *probe.Report) map[string]string {
	m := map[string]string{}
	for _, n := range r.Nodes {
		e := n.Open.ErrnoName
		if e == "" {
			e = "OK"
		}
		m[n.Path] = e
	}
	return m
}

func hostProbe(t *testing.T, c *container) *Result {
	t.Helper()
	res, err := Probe(context.Background(), c.pid, Options{NoLibraries: true, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("host-side probe of %s: %v", c.id, err)
	}
	return res
}

func aspect(res *Result, name string) *Aspect {
	for i := range res.Aspects {
		if res.Aspects[i].Name == name {
			return &res.Aspects[i]
		}
	}
	return nil
}

// nodeDir is a tmpfs directory of test nodes on the host, nodev or not,
// traversable by any uid.
func nodeDir(t *testing.T, nodev bool) string {
	t.Helper()
	d := filepath.Join(worldDir(t), "nodes")
	os.Mkdir(d, 0o755)
	var flags uintptr = unix.MS_NOSUID
	if nodev {
		flags |= unix.MS_NODEV
	}
	if err := unix.Mount("tmpfs", d, "tmpfs", flags, "mode=755,size=16k"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(d, unix.MNT_DETACH) })
	return d
}

func mknod(t *testing.T, p string, major, minor uint32, mode uint32) {
	t.Helper()
	if err := unix.Mknod(p, unix.S_IFCHR|mode, int(unix.Mkdev(major, minor))); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, os.FileMode(mode))
}

func majorFree(t *testing.T, major int) {
	t.Helper()
	b, err := os.ReadFile("/proc/devices")
	if err != nil {
		t.Skip(err)
	}
	chars, _, _ := strings.Cut(string(b), "Block devices")
	for _, l := range strings.Split(chars, "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == strconv.Itoa(major) {
			t.Skipf("major %d is registered here (%s): the no-driver case needs a host without it", major, f[1])
		}
	}
}

// TestHostProbeMatchesInside runs, for each case below, a real
// container and compares the errno of every accelerator node's open made
// by the host-side probe (Probe) with the one `runc exec` gets inside,
// and with the errno the case is about.
func TestHostProbeMatchesInside(t *testing.T) {
	dev := func(path string, major, minor int64) specs.LinuxDevice {
		return specs.LinuxDevice{Path: path, Type: "c", Major: major, Minor: minor, FileMode: ptr(os.FileMode(0o666)), UID: ptr(uint32(0)), GID: ptr(uint32(0))}
	}
	allow := func(major, minor int64) specs.LinuxDeviceCgroup {
		return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(major), Minor: ptr(minor), Access: "rw"}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) func(*specs.Spec)
		node  string // the accelerator node of the case
		errno string
	}{
		{"healthy 1:5 node", func(t *testing.T) func(*specs.Spec) {
			return func(s *specs.Spec) {
				s.Linux.Devices = append(s.Linux.Devices, dev("/dev/nvidia0", 1, 5))
				s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, allow(1, 5))
			}
		}, "/dev/nvidia0", "OK"},
		{"195:0 without the driver", func(t *testing.T) func(*specs.Spec) {
			majorFree(t, 195)
			return func(s *specs.Spec) {
				s.Linux.Devices = append(s.Linux.Devices, dev("/dev/nvidia0", 195, 0))
				s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, allow(195, 0))
			}
		}, "/dev/nvidia0", "ENXIO"},
		{"cgroup denies the node", func(t *testing.T) func(*specs.Spec) {
			return func(s *specs.Spec) {
				// Created, but no rule allows it (runc's defaults allow
				// only the standard nodes).
				s.Linux.Devices = append(s.Linux.Devices, dev("/dev/dri/renderD128", 195, 1))
			}
		}, "/dev/dri/renderD128", "EPERM"},
		{"user namespace, owner unmapped", func(t *testing.T) func(*specs.Spec) {
			nodes := nodeDir(t, false)
			mknod(t, filepath.Join(nodes, "nvidia0"), 1, 5, 0o660) // root:root on the host
			return func(s *specs.Spec) {
				s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
				s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
				s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
				s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/nvidia0", Type: "bind", Source: filepath.Join(nodes, "nvidia0"), Options: []string{"bind"}})
				s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, allow(1, 5))
			}
		}, "/dev/nvidia0", "EACCES"},
		{"nodev mount", func(t *testing.T) func(*specs.Spec) {
			nodes := nodeDir(t, true)
			mknod(t, filepath.Join(nodes, "renderD128"), 1, 5, 0o666)
			return func(s *specs.Spec) {
				s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/dri", Type: "bind", Source: nodes, Options: []string{"rbind", "nodev", "nosuid"}})
				s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, allow(1, 5))
			}
		}, "/dev/dri/renderD128", "EACCES"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := startContainer(t, tc.setup(t))
			in := errnos(c.inside(t))
			res := hostProbe(t, c)
			host := errnos(res.Probe)
			if in[tc.node] != tc.errno {
				t.Errorf("inside (runc exec): %s gave %q, the case is about %s (all: %v)", tc.node, in[tc.node], tc.errno, in)
			}
			if d := cmp.Diff(in, host); d != "" {
				t.Errorf("host-side probe differs from runc exec (-inside +host):\n%s", d)
			}
			for _, a := range res.Aspects {
				t.Logf("%-28s %-5v %s %s", a.Name, a.Reproduced, a.How, a.Note)
			}
			if !res.Reproduced() {
				t.Errorf("an aspect that decides an open was not reproduced")
			}
			for _, name := range []string{AspectCgroup + " devices", AspectCgroup + " cgroup2"} {
				if a := aspect(res, name); a == nil || !a.Reproduced {
					t.Errorf("%s: %+v", name, a)
				}
			}
			if !strings.Contains(res.Probe.Process.Cgroup, "devices:/"+c.id) {
				t.Errorf("the probing thread's cgroups: %q, want the container's %s", res.Probe.Process.Cgroup, c.id)
			}
		})
	}
}

// TestHostProbeCredentials: the probe takes the container's process's
// identity — a non-root uid, no capabilities, no_new_privs — and a node
// that only root may open is refused to it as inside.
func TestHostProbeCredentials(t *testing.T) {
	nodes := nodeDir(t, false)
	mknod(t, filepath.Join(nodes, "video0"), 1, 5, 0o600)
	c := startContainer(t, func(s *specs.Spec) {
		s.Process.User = specs.User{UID: 1234, GID: 5678, AdditionalGids: []uint32{4242}}
		s.Process.Capabilities = &specs.LinuxCapabilities{}
		s.Process.NoNewPrivileges = true
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/dev/video0", Type: "bind", Source: filepath.Join(nodes, "video0"), Options: []string{"bind"}})
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(int64(1)), Minor: ptr(int64(5)), Access: "rw"})
	})
	in := c.inside(t)
	res := hostProbe(t, c)
	if d := cmp.Diff(errnos(in), errnos(res.Probe)); d != "" || errnos(in)["/dev/video0"] != "EACCES" {
		t.Errorf("inside %v, host %v: want EACCES both", errnos(in), errnos(res.Probe))
	}
	p, q := in.Process, res.Probe.Process
	if p.UID != 1234 || q.UID != 1234 || q.GID != 5678 || q.CapEff != p.CapEff || q.CapBnd != p.CapBnd || !q.NoNewPrivs || fmt.Sprint(q.Groups) != fmt.Sprint(p.Groups) {
		t.Errorf("identity inside %+v, host-side %+v", p, q)
	}
	for _, name := range []string{AspectIDs, AspectCaps, AspectNNP} {
		if a := aspect(res, name); a == nil || !a.Reproduced {
			t.Errorf("%s: %+v", name, a)
		}
	}
}

// TestProbeRefusesAGonePID: a PID that is not there is an error, not a
// probe of something else.
func TestProbeRefusesAGonePID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if _, err := Probe(context.Background(), cmd.Process.Pid, Options{NoLibraries: true}); err == nil || !strings.Contains(err.Error(), "no process") {
		t.Errorf("probe of an exited PID: %v", err)
	}
}

const fakeCUDA = `
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
int cuInit(unsigned int f) { return 0; }
int cuDriverGetVersion(int *v) { *v = 12080; return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDeviceGetName(char *n, int len, int d) { snprintf(n, len, "%s", getenv("FAKE_GPU_NAME") ? getenv("FAKE_GPU_NAME") : "unnamed"); return 0; }
int cuCtxCreate_v2(void **c, unsigned int f, int d) { *c = malloc(1); return 0; }
int cuCtxDestroy_v2(void *c) { free(c); return 0; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)malloc(n); return 0; }
int cuMemFree_v2(unsigned long long p) { free((void *)p); return 0; }
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) { memcpy((void *)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n) { memcpy(d, (void *)s, n); return 0; }
`

// TestHostProbeRunsTheHelperInside: the CUDA helper, opened on the host,
// runs inside the container from its fd, loads the container's library
// (a stand-in compiled here, found through the container's
// LD_LIBRARY_PATH) with the container's glibc loader, and sees the
// container's environment. A container without a glibc loader gets the
// helper's NOT_RUN naming it.
func TestHostProbeRunsTheHelperInside(t *testing.T) {
	const loader = "/lib64/ld-linux-x86-64.so.2"
	if _, err := os.Stat(loader); err != nil {
		t.Skipf("no %s on this host", loader)
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler for the stand-in library")
	}
	// Built as it ships: CGO_ENABLED=0 (purego), dynamically linked.
	helper := filepath.Join(testbin.Dir(t, "../..", testbin.Options{Static: true, Packages: []string{"./cmd/accel-doctor-cuda"}}), probe.HelperName)
	libDir := filepath.Join(worldDir(t), "lib")
	os.Mkdir(libDir, 0o755)
	src := filepath.Join(t.TempDir(), "fake.c")
	os.WriteFile(src, []byte(fakeCUDA), 0o644)
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(libDir, probe.LibCUDA), "-Wl,-soname,"+probe.LibCUDA, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	ro := []string{"rbind", "ro"}
	withLib := func(s *specs.Spec) {
		s.Process.Env = append(s.Process.Env, "LD_LIBRARY_PATH=/opt/fake", "FAKE_GPU_NAME=container-env-gpu")
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/opt/fake", Type: "bind", Source: libDir, Options: ro})
	}

	c := startContainer(t, func(s *specs.Spec) {
		withLib(s)
		for _, d := range []string{"/lib64", "/lib/x86_64-linux-gnu"} {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: d, Type: "bind", Source: d, Options: ro})
		}
	})
	res, err := Probe(context.Background(), c.pid, Options{HelperPath: helper, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cu := res.Probe.CUDA
	if cu.NotRun != "" || !cu.Done || cu.FirstFailure() != nil || cu.Loaded != "/opt/fake/"+probe.LibCUDA {
		t.Fatalf("CUDA inside: %+v", cu)
	}
	named := false
	for _, s := range cu.Steps {
		named = named || (s.Name == "cuDeviceGetName" && s.Value == "container-env-gpu")
	}
	if !named {
		t.Errorf("the helper did not see the container's environment: %+v", cu.Steps)
	}

	bare := startContainer(t, withLib)
	res, err = Probe(context.Background(), bare.pid, Options{HelperPath: helper, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if nr := res.Probe.CUDA.NotRun; !strings.Contains(nr, loader) || !strings.Contains(nr, "dynamic loader") {
		t.Errorf("CUDA in a container without glibc: %q", nr)
	}
}

// BenchmarkHostProbe is one `container --probe` of a running container
// with one accelerator node: read the target, fork into its namespaces
// and cgroups, probe, report.
//
//	go test -run XXX -bench HostProbe ./internal/enter
func BenchmarkHostProbe(b *testing.B) {
	c := startContainer(b, func(s *specs.Spec) {
		s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{Path: "/dev/nvidia0", Type: "c", Major: 1, Minor: 5, FileMode: ptr(os.FileMode(0o666))})
	})
	for b.Loop() {
		if _, err := Probe(context.Background(), c.pid, Options{NoLibraries: true}); err != nil {
			b.Fatal(err)
		}
	}
}
