package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ThirdParty is a device plugin or DRA driver that other people wrote and
// ship, built from its released source so that the tests run it as its
// users do.
type ThirdParty struct {
	// Name is the binary's name.
	Name string
	// Module and Version name a released module, built in its own
	// directory of the module cache with its own go.mod and go.sum: the
	// dependency versions its maintainers released it with, not this
	// module's (a plugin built against other k8s.io/* releases may not
	// compile, and would not be the plugin its users run). Module ""
	// is a tool of this module (go.mod's tool directive), built with
	// this module's versions: Kubernetes' own test images, which live
	// in k8s.io/kubernetes.
	Module, Version string
	// Pkg is the main package: an import path for a tool of this
	// module, a directory relative to Module's root otherwise.
	Pkg string
}

// The third-party plugins and drivers the tests run; e2e/README.md says
// what each is and why it was chosen.
var (
	// SampleDevicePlugin is Kubernetes' sample device plugin (the image
	// of its node e2e tests): two devices, Dev-1 and Dev-2, of
	// example.com/resource; Allocate creates /tmp/ID and mounts it.
	// Its socket is named dp.<unix time>; it re-registers 10 s after it
	// sees kubelet.sock created again (the device manager stub's Watch
	// polls every 10 s before it restarts its server).
	SampleDevicePlugin = ThirdParty{Name: "sample-device-plugin", Pkg: "k8s.io/kubernetes/test/images/sample-device-plugin"}
	// RDMASharedDevicePlugin is the k8s-rdma-shared-dev-plugin: one
	// socket per configured resource, named RESOURCE.sock, which it
	// watches (an lstat every 5 s) and serves and registers again when
	// it is gone: it sees a kubelet restart by its own socket's removal.
	RDMASharedDevicePlugin = ThirdParty{Name: "k8s-rdma-shared-dp", Module: "github.com/Mellanox/k8s-rdma-shared-dev-plugin", Version: "v1.5.3", Pkg: "./cmd/k8s-rdma-shared-dp"}
	// DRAExampleDriver is the kubernetes-sigs DRA example driver's
	// kubelet plugin, built on k8s.io/dynamic-resource-allocation's
	// kubeletplugin: it publishes a ResourceSlice of fake GPUs
	// (gpu.example.com) for its node, reads each claim from the API
	// server when the kubelet asks it to prepare it, and writes a CDI
	// spec per claim.
	DRAExampleDriver = ThirdParty{Name: "dra-example-kubeletplugin", Module: "sigs.k8s.io/dra-example-driver", Version: "v0.4.0", Pkg: "./cmd/dra-example-kubeletplugin"}
)

// AllThirdParty are the binaries BuildThirdParty builds.
var AllThirdParty = []ThirdParty{SampleDevicePlugin, RDMASharedDevicePlugin, DRAExampleDriver}

// ThirdPartyDir is where the third-party binaries are kept between runs:
// $ACCEL_DOCTOR_E2E_THIRDPARTY, else thirdparty-GOVERSION in the user's
// cache directory's accel-doctor-test, beside the product's test
// binaries.
func ThirdPartyDir() (string, error) {
	if d := os.Getenv("ACCEL_DOCTOR_E2E_THIRDPARTY"); d != "" {
		return d, nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		c = filepath.Join(os.TempDir(), fmt.Sprintf("accel-doctor-test-cache-%d", os.Getuid()))
	}
	return filepath.Join(c, "accel-doctor-test", "thirdparty-"+runtime.Version()), nil
}

// BuildThirdParty builds ps into dir (go build -o dir/NAME). A tool of
// this module is built each time (go build finds it up to date by its
// build ID and links nothing); a released module's binary is built once:
// its name holds the version, and a version's source never changes. It
// holds a lock on dir while it builds, so that test binaries run side by
// side do not write one binary at once.
func BuildThirdParty(ctx context.Context, dir string, ps ...ThirdParty) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	e2eDir, err := findModule(productModule + "/e2e")
	if err != nil {
		return err
	}
	for _, p := range ps {
		out := filepath.Join(dir, p.binName())
		if p.Module == "" {
			if err := goCmd(ctx, e2eDir, "build", "-o", out, p.Pkg); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			continue
		}
		if _, err := os.Stat(out); err == nil {
			continue
		}
		src, err := moduleSource(ctx, p.Module+"@"+p.Version)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		// Built into a temporary name and renamed: a build stopped
		// half-way leaves no binary that the next run would take.
		if err := goCmd(ctx, src, "build", "-o", out+".new", p.Pkg); err != nil {
			return fmt.Errorf("%s %s: %w", p.Module, p.Version, err)
		}
		if err := os.Rename(out+".new", out); err != nil {
			return err
		}
	}
	return nil
}

func (p ThirdParty) binName() string {
	if p.Version == "" {
		return p.Name
	}
	return p.Name + "@" + p.Version
}

var (
	thirdPartyMu    sync.Mutex
	thirdPartyBuilt = map[string]string{}
)

// Path is the path of p's binary, built (BuildThirdParty) once for the
// test binary; a failed build fails the test.
func (p ThirdParty) Path(t testing.TB) string {
	t.Helper()
	thirdPartyMu.Lock()
	defer thirdPartyMu.Unlock()
	if bin, ok := thirdPartyBuilt[p.Name]; ok {
		return bin
	}
	dir, err := ThirdPartyDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-30*time.Second))
			defer cancel()
		}
	}
	start := time.Now()
	if err := BuildThirdParty(ctx, dir, p); err != nil {
		t.Fatalf("build %s: %v", p.Name, err)
	}
	t.Logf("%s: built or found up to date in %s in %v", p.Name, dir, time.Since(start).Round(time.Millisecond))
	bin := filepath.Join(dir, p.binName())
	thirdPartyBuilt[p.Name] = bin
	return bin
}

// moduleSource downloads mod@version into the module cache (the module
// proxy, as go build would) and gives its directory there.
func moduleSource(ctx context.Context, modVersion string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", modVersion)
	// Outside any module: the download must not touch this module's
	// go.mod or go.sum.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", modVersion, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %v\n%s%s", modVersion, err, out, stderr.String())
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s gave no directory: %s", modVersion, out)
	}
	return info.Dir, nil
}

// goCmd runs go with args in dir, in a process group of its own killed
// with this process, with its own go.mod as it stands (-mod=readonly: a
// released module's go.sum is complete, and the module cache is not
// written).
func goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off", "CGO_ENABLED=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}
