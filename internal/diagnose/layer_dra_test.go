package diagnose

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

const draNodes = "../dra/testdata/nodes/"

// draFindings runs layer 6 over a DRA node tree and keeps kube.dra's
// findings as "CODE STATUS".
func draFindings(t *testing.T, tree string) map[string]int {
	t.Helper()
	root, err := hostfs.New(draNodes + tree)
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, tree, Options{Layers: []report.Layer{report.LayerKube}})
	got := map[string]int{}
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			got[f.Code+" "+string(f.Status)]++
		}
	}
	return got
}

// The planted faults (a claim prepared before a reboot whose CDI spec was
// in the tmpfs; a GPU advertised by the device plugin and a DRA driver),
// the healthy node (the kubelet's own state file: no FAIL or WARN), and
// a tree where the kubelet's directories were not captured (nothing
// judged: the kubelet check says NOT_RUN).
func TestDRALayer(t *testing.T) {
	for _, c := range []struct {
		tree string
		want []string
	}{
		// A tree cannot hold sockets: no driver is registered in any of
		// them, so the claims' driver is "not registered" (WARN) in each;
		// the registration cases run on real sockets in internal/dra.
		{"dra-reboot", []string{"DRA_CLAIM_CDI_UNRESOLVED FAIL", "DRA_STATE_FROM_EARLIER_BOOT PASS", "DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
		{"dra-double", []string{"DRA_DOUBLE_ADVERTISED WARN", "DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
		{"dra-healthy", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_CDI_OK PASS"}},
		// The runtime under the driver (the claims in the state make
		// gpu.example.com the node's driver): containerd 1.7 with
		// enable_cdi = false; containerd 1.7.0, whose CDI library
		// (v0.5.4) loads cdiVersion up to 0.5.0, under the driver's
		// 0.6.0 spec; a config.toml that cannot be read (a directory:
		// it may turn CDI off) is not judged.
		{"dra-cdi-disabled", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_NO_CDI FAIL"}},
		{"dra-cdi-too-old", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_CDI_TOO_OLD FAIL"}},
		{"dra-runtime-unread", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN", "DRA_RUNTIME_CDI_NOT_CHECKED NOT_RUN"}},
	} {
		t.Run(c.tree, func(t *testing.T) {
			got := draFindings(t, c.tree)
			for _, w := range c.want {
				if got[w] == 0 {
					t.Errorf("no %s; got %v", w, got)
				}
			}
			for k := range got {
				if !contains(c.want, k) && (len(k) > 5 && (k[len(k)-4:] == "FAIL" || k[len(k)-4:] == "WARN")) {
					t.Errorf("unexpected %s", k)
				}
			}
		})
	}
	root, err := hostfs.New("../../testdata/hosts/nvidia-h100x8")
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, "nvidia-h100x8", Options{Layers: []report.Layer{report.LayerKube}})
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			t.Errorf("a tree without the kubelet's directories: %s %s", f.Code, f.Status)
		}
		if f.Check == "kube.node" && f.Status != report.NotRun {
			t.Errorf("kube.node on a tree without the kubelet: %s %s", f.Code, f.Status)
		}
	}
}

// The runtime under the node's DRA driver: exactly one finding per tree,
// its status the tree's cause, its evidence where the answer was read.
func TestDRARuntimeCDI(t *testing.T) {
	for _, c := range []struct {
		tree, code string
		status     report.Status
		says, ev   string
	}{
		{"dra-healthy", "DRA_RUNTIME_CDI_OK", report.Pass, "has CDI enabled and loads /etc/cdi/example.com-gpu.yaml (cdiVersion 0.6.0), /var/run/cdi/k8s.gpu.example.com-claim_", "enable_cdi = true in /etc/containerd/config.toml"},
		{"dra-cdi-disabled", "DRA_RUNTIME_NO_CDI", report.Fail, "containerd 1.7.24 (/usr/bin/containerd) has CDI disabled", "enable_cdi = false in /etc/containerd/config.toml"},
		{"dra-cdi-too-old", "DRA_RUNTIME_CDI_TOO_OLD", report.Fail, "loads cdiVersion up to 0.5.0", "cdiVersion 0.6.0"},
		{"dra-runtime-unread", "DRA_RUNTIME_CDI_NOT_CHECKED", report.NotRun, "is not known", "/etc/containerd/config.toml"},
	} {
		t.Run(c.tree, func(t *testing.T) {
			root, err := hostfs.New(draNodes + c.tree)
			if err != nil {
				t.Fatal(err)
			}
			rep := runFixture(t, root, c.tree, Options{Layers: []report.Layer{report.LayerKube}})
			var got []report.Finding
			for _, f := range rep.Findings {
				if f.Check == "kube.dra" && strings.HasPrefix(f.Code, "DRA_RUNTIME_") {
					got = append(got, f)
				}
			}
			if len(got) != 1 {
				t.Fatalf("runtime findings %+v, want one %s", got, c.code)
			}
			f := got[0]
			if f.Code != c.code || f.Status != c.status || f.Subject != "gpu.example.com @ containerd" || !strings.Contains(f.Summary, c.says) {
				t.Errorf("%s %s %q: %s", f.Code, f.Status, f.Subject, f.Summary)
			}
			text := f.Reason
			for _, e := range f.Evidence {
				text += "\n" + e.Path + ": " + e.Value
			}
			if !strings.Contains(text, c.ev) {
				t.Errorf("evidence and reason do not name %q:\n%s", c.ev, text)
			}
			if c.status == report.NotRun && f.Reason == "" || c.status == report.Fail && f.Remediation == "" {
				t.Errorf("reason %q remediation %q", f.Reason, f.Remediation)
			}
		})
	}
}

// Two CRI runtimes, and which one the kubelet uses is not read: the one
// that cannot serve the driver is a WARN, not a FAIL, while the other
// (CRI-O of a release not known here) might.
func TestDRARuntimeCDITwoRuntimes(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(draNodes+"dra-cdi-disabled")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/bin/crio"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, hostfs.MustNew(dir), "dra-cdi-disabled+crio", Options{Layers: []report.Layer{report.LayerKube}})
	got := map[string]string{}
	for _, f := range rep.Findings {
		if strings.HasPrefix(f.Code, "DRA_RUNTIME_") {
			got[f.Subject] = f.Code + " " + string(f.Status)
		}
	}
	want := map[string]string{"gpu.example.com @ containerd": "DRA_RUNTIME_NO_CDI WARN", "gpu.example.com @ crio": "DRA_RUNTIME_CDI_NOT_CHECKED NOT_RUN"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
