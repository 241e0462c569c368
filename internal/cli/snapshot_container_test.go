package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// TestSnapshotContainer: `snapshot --container-id PREFIX` of a real runc
// container holds what finding it reads, so that Find on the snapshot
// gives the same container, and what --pid and --oci-spec capture, so that
// the cgroup layer replays as it judged the live container. The spec's
// environment values stay on the host.
func TestSnapshotContainer(t *testing.T) {
	id, pid, spec := runcContainer(t, nil, nil, func(s *specs.Spec) {
		s.Process.Env = append(s.Process.Env, "HF_TOKEN=snapS3cret")
		s.Annotations = map[string]string{"io.kubernetes.cri.sandbox-namespace": "ns", "io.kubernetes.cri.sandbox-name": "pod",
			"io.kubernetes.cri.container-name": "c"}
	})
	live, _, err := runtime.Find(hostfs.MustNew("/"), id)
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "ctr.tar.gz")
	if _, stderr, code := run(t, "snapshot", "--container-id", id[:len(id)-2], snap); code != 0 {
		t.Fatalf("snapshot --container: exit %d: %s", code, stderr)
	}
	root, cleanup, err := hostfs.OpenSnapshotFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if meta, ok := root.ReadSnapshotMeta(); !ok || meta.PID != pid {
		t.Errorf("snapshot meta %+v: want PID %d", meta, pid)
	}
	got, _, err := runtime.Find(root, id)
	if err != nil {
		t.Fatalf("Find on the snapshot: %v", err)
	}
	if got.ID != live.ID || got.PID != pid || got.StartTime != live.StartTime || got.Status != runtime.StatusRunning ||
		got.StatusReason != live.StatusReason || got.ConfigPath != spec || got.Spec == nil || got.Pod == nil || *got.Pod != *live.Pod {
		t.Errorf("replayed %+v\nlive %+v", got, live)
	}
	if env := strings.Join(got.Spec.Process.Env, " "); strings.Contains(env, "snapS3cret") || !strings.Contains(env, "HF_TOKEN=") {
		t.Errorf("replayed env %s", env)
	}
	filepath.Walk(root.Dir(), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "snapS3cret") {
				t.Errorf("%s holds the token", p)
			}
		}
		return nil
	})
	// The cgroup layer replays as it judged the live container.
	liveRep := checkJSON(t, "check", "--layer", "cgroup", "--pid", strconv.Itoa(pid), "--oci-spec", spec)
	replay := checkJSON(t, "check", "--snapshot", snap, "--layer", "cgroup", "--pid", strconv.Itoa(pid), "--oci-spec", spec)
	if len(liveRep.Findings) == 0 {
		t.Fatal("the cgroup layer judged nothing")
	}
	if a, b := outcomes(liveRep), outcomes(replay); a != b {
		t.Errorf("replay differs from the live container:\n%s\n---\n%s", a, b)
	}
}

func TestSnapshotContainerUsage(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "run/runc"), 0o755)
	for _, args := range [][]string{
		{"snapshot", "--root", dir, "--container-id", "nosuch", filepath.Join(dir, "a.tar.gz")},
		{"snapshot", "--root", dir, "--container-id", "../x", filepath.Join(dir, "b.tar.gz")},
		{"snapshot", "--root", dir, "--container-id", "x", "--pid", "1", filepath.Join(dir, "c.tar.gz")},
	} {
		_, stderr, code := run(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
		if _, err := os.Stat(args[len(args)-1]); err == nil {
			t.Errorf("%v wrote the archive", args)
		}
	}
	if _, stderr, _ := run(t, "snapshot", "--root", dir, "--container-id", "nosuch", filepath.Join(dir, "d.tar.gz")); !strings.Contains(stderr, `no container matches "nosuch"`) {
		t.Errorf("stderr %q", stderr)
	}
}
