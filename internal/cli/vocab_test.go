package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -v is --verbose in every command; at the root it still prints the
// version for a release, with a note on stderr, and the help no longer
// offers it.
func TestVersionShorthand(t *testing.T) {
	out, stderr, code := run(t, "-v")
	if code != 0 || !strings.Contains(out, "version "+Version) {
		t.Errorf("-v: exit %d, stdout %q", code, out)
	}
	if !strings.Contains(stderr, "-v has been deprecated") || !strings.Contains(stderr, "--version") {
		t.Errorf("-v: stderr %q says nothing of --version", stderr)
	}
	if out, stderr, _ := run(t, "--version"); !strings.Contains(out, Version) || stderr != "" {
		t.Errorf("--version: stdout %q stderr %q", out, stderr)
	}
	if out, _, _ := run(t, "--help"); strings.Contains(out, "-v, --version") || !strings.Contains(out, "--version") {
		t.Errorf("the root's help:\n%s", out)
	}
}

// An old flag name, on a real command line, does what the new one does;
// its note goes to stderr, never into the report or archive on stdout.
func TestOldFlagNamesStillWork(t *testing.T) {
	host := hosts + "nvidia-h100x8"
	for _, c := range []struct {
		old, new []string
		note     string
	}{
		{[]string{"cdi", "validate", "--root", host, "--spec-dir", "/etc/cdi", "-o", "json"},
			[]string{"cdi", "validate", "--root", host, "--cdi-spec-dir", "/etc/cdi", "-o", "json"}, "--spec-dir has been deprecated, use --cdi-spec-dir"},
		{[]string{"cgroup", "eval", "--root", hosts + "nvidia-h100x8-k8s-cgroupv1", "--pid", "4242", "--device", "/dev/nvidia1", "-o", "json"},
			[]string{"cgroup", "eval", "--root", hosts + "nvidia-h100x8-k8s-cgroupv1", "--pid", "4242", "--device-node", "/dev/nvidia1", "-o", "json"},
			"--device has been deprecated, use --device-node instead (--device is a PCI function in check and iommu)"},
	} {
		oldOut, oldErr, oldCode := run(t, c.old...)
		newOut, newErr, newCode := run(t, c.new...)
		if oldCode != newCode || !strings.Contains(oldErr, newErr) || strings.Contains(newErr, "deprecated") {
			t.Errorf("%q: exit %d, stderr %q; %q: exit %d, stderr %q", c.old, oldCode, oldErr, c.new, newCode, newErr)
		}
		if !strings.Contains(oldErr, c.note) {
			t.Errorf("%q: stderr %q, want %q", c.old, oldErr, c.note)
		}
		var a, b map[string]any
		if err := json.Unmarshal([]byte(oldOut), &a); err != nil {
			t.Fatalf("%q: stdout is not the JSON report: %v\n%s", c.old, err, oldOut)
		}
		json.Unmarshal([]byte(newOut), &b)
		delete(a, "generated")
		delete(b, "generated")
		if ja, _ := json.Marshal(a); string(ja) != string(mustJSON(t, b)) {
			t.Errorf("%q and %q report differently:\n%s\n%s", c.old, c.new, oldOut, newOut)
		}
	}

	// The validation of the new name answers the old one.
	if _, stderr, code := run(t, "check", "--snapshot", "demo", "--spec", "/no/such/config.json"); code != 2 || !strings.Contains(stderr, "--oci-spec /no/such/config.json: no such file") {
		t.Errorf("check --spec of a missing file: exit %d, %q", code, stderr)
	}

	// snapshot -o FILE, its first form: the archive is written, the note
	// is on stderr.
	snap := filepath.Join(t.TempDir(), "s.tar.gz")
	_, stderr, code := run(t, "snapshot", "--root", hosts+"kvm-virtio", "-o", snap)
	if fi, err := os.Stat(snap); code != 0 || err != nil || fi.Size() == 0 {
		t.Errorf("snapshot -o: exit %d, %v\n%s", code, err, stderr)
	}
	if !strings.Contains(stderr, "--output has been deprecated, use --filename instead") {
		t.Errorf("snapshot -o: stderr %q", stderr)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A command that reads no host has no --root; the two a user may point at
// a host root say why it does not apply.
func TestRootWhereItDoesNotApply(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "--root", "/host", "--device-node", "/dev/null"}, "--root does not apply to sandbox"},
		{[]string{"--root", "/host", "probe"}, "--root does not apply to probe"},
		{[]string{"--root", "/host", "explain", "CGROUP_DEVICE_DENIED"}, "unknown flag: --root"},
	} {
		if _, stderr, code := run(t, c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}
