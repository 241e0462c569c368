package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// accel-doctor hands the commands that link the Kubernetes client to
// accel-doctor-kube beside it (internal/cli KubeBinary): the user's
// command line, exit status and output are the other binary's; without
// it, a usage error says how to build it.
func TestHandOverToKubeBinary(t *testing.T) {
	planted := "../../internal/lint/testdata/planted/LINT_PRIVILEGED_GPU.yaml"
	r := runBin(t, []string{"PATH=/usr/bin:/bin"}, "lint", "-f", planted)
	if r.code != 2 || !strings.Contains(r.stderr, "accel-doctor-kube") || !strings.Contains(r.stderr, "go build") {
		t.Errorf("without accel-doctor-kube: exit %d, stderr %q", r.code, r.stderr)
	}
	dir := product(t)
	run := func(args ...string) (string, string, int) {
		cmd := exec.Command(filepath.Join(dir, "accel-doctor"), args...)
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return o.String(), e.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), 0
	}
	if out, stderr, code := run("lint", "-f", planted); code != 0 || !strings.Contains(out, "WARN LINT_PRIVILEGED_GPU") {
		t.Errorf("lint through accel-doctor: exit %d\n%s%s", code, out, stderr)
	}
	if _, _, code := run("lint", "-f", "../../internal/lint/testdata/planted"); code != 1 {
		t.Errorf("lint's FAIL exit status did not come through: %d", code)
	}
	if out, _, code := run("--help"); code != 0 || !strings.Contains(out, "cluster") || !strings.Contains(out, "lint") {
		t.Errorf("help does not list the handed-over commands: %q", out)
	}
}

// Layer 6's calls on the kubelet's sockets are made by accel-doctor-kubelet
// (internal/kubeletrpc): accel-doctor links no gRPC. With the helper beside
// it a plugin that answers is judged; without it, or with a helper that
// answers garbage, the call is NOT_RUN with the reason, never a FAIL.
func TestKubeletCallsThroughTheHelper(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "var/lib/kubelet/device-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", filepath.Join(dir, "fake.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, answersOptions{})
	go srv.Serve(lis)
	defer srv.Stop()

	plugin := func(t *testing.T, bin string) (report.Finding, int) {
		t.Helper()
		cmd := exec.Command(bin, "--root", root, "check", "--layer", "kube", "-o", "json")
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var rep report.Report
		if err := json.Unmarshal(o.Bytes(), &rep); err != nil {
			t.Fatalf("%v: %s%s", err, o.String(), e.String())
		}
		for _, f := range rep.Findings {
			if f.Subject == "fake.sock" {
				return f, code
			}
		}
		t.Fatalf("no finding for fake.sock: %s", o.String())
		return report.Finding{}, 0
	}

	// Alone: no helper beside it (none is looked for on PATH).
	bin := accelDoctor(t)
	if f, code := plugin(t, bin); f.Status != report.NotRun || f.Code != "KUBELET_PLUGIN_NOT_ANSWERING" || !strings.Contains(f.Reason, "accel-doctor-kubelet") || code != 0 {
		t.Errorf("without accel-doctor-kubelet: exit %d, %+v", code, f)
	}

	// A helper that answers garbage.
	bad := t.TempDir()
	copyExe(t, bin, filepath.Join(bad, "accel-doctor"))
	if err := os.WriteFile(filepath.Join(bad, "accel-doctor-kubelet"), []byte("#!/bin/sh\necho '{\"format\": 1, \"replies\": []}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if f, code := plugin(t, filepath.Join(bad, "accel-doctor")); f.Status != report.NotRun || !strings.Contains(f.Reason, "answered 0 of 1 calls") || code != 0 {
		t.Errorf("with a helper that answers no call: exit %d, %+v", code, f)
	}

	// Both binaries side by side: the plugin answered.
	f, code := plugin(t, filepath.Join(product(t), "accel-doctor"))
	if f.Status != report.Pass || f.Code != "KUBELET_PLUGIN_OK" || code != 0 {
		t.Errorf("with accel-doctor-kubelet: exit %d, %+v", code, f)
	}
	answered := false
	for _, ev := range f.Evidence {
		answered = answered || ev.Path == "/v1beta1.DevicePlugin/GetDevicePluginOptions" && strings.HasPrefix(ev.Value, "answered")
	}
	if !answered {
		t.Errorf("the evidence does not show the call answered: %+v", f.Evidence)
	}
}

type answersOptions struct {
	pluginapi.UnimplementedDevicePluginServer
}

func (answersOptions) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func copyExe(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A root run executes only its own helpers: one first on PATH, in a
// directory of another user's, is never run; one beside the binary that
// another user owns, or that every user may write, is refused with the
// reason; the release's own, beside it, runs.
func TestHelpersOnlyFromBesideAndTrusted(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("planting files owned by another user needs root")
	}
	const nobody = 65534
	mark := filepath.Join(t.TempDir(), "ran")
	script := []byte("#!/bin/sh\ntouch " + mark + "\n")
	plant := func(dir, owner string, uid int, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, owner)
		if err := os.WriteFile(p, script, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	bin := accelDoctor(t)
	run := func(exe string, env ...string) result {
		t.Helper()
		cmd := exec.Command(exe, "plugin", "test", "--help")
		cmd.Env = append(os.Environ(), env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{o.String(), e.String(), code}
	}

	// First on PATH, in a directory nobody owns.
	onPath := t.TempDir()
	if err := os.Chown(onPath, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	plant(onPath, "accel-doctor-kubelet", nobody, 0o755)
	r := run(bin, "PATH="+onPath+":/usr/bin:/bin", "ACCEL_DOCTOR_HELPER_DIR=")
	if r.code != 2 || !strings.Contains(r.stderr, "does not look on PATH") {
		t.Errorf("a helper only on PATH: exit %d, stderr %q", r.code, r.stderr)
	}

	// Beside the binary, owned by nobody; then root's but writable by all.
	for _, c := range []struct {
		name string
		uid  int
		mode os.FileMode
		want string
	}{
		{"owned by nobody", nobody, 0o755, "is owned by uid 65534"},
		{"writable by every user", 0, 0o757, "is writable by every user"},
	} {
		dir := t.TempDir()
		copyExe(t, bin, filepath.Join(dir, "accel-doctor"))
		plant(dir, "accel-doctor-kubelet", c.uid, c.mode)
		r := run(filepath.Join(dir, "accel-doctor"), "PATH=/usr/bin:/bin", "ACCEL_DOCTOR_HELPER_DIR=")
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "is not run") {
			t.Errorf("%s: exit %d, stderr %q", c.name, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("a planted helper ran as root")
	}

	// The release's own, side by side: the command is handed over.
	r = run(filepath.Join(product(t), "accel-doctor"), "PATH=/usr/bin:/bin", "ACCEL_DOCTOR_HELPER_DIR=")
	if r.code != 0 || !strings.Contains(r.stdout, "plugin test") {
		t.Errorf("with the release's accel-doctor-kubelet: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}
