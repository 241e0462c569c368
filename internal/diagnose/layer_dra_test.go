package diagnose

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/dra"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
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
		{"dra-healthy", []string{"DRA_CLAIM_DRIVER_NOT_REGISTERED WARN"}},
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

// judgeDRARegistration on each kind of registration: a live one is a PASS
// naming the driver; each fault is its FAIL and never also the PASS.
func TestDRARegistrationJudged(t *testing.T) {
	info := func(versions ...string) *dra.PluginInfo {
		return &dra.PluginInfo{Type: dra.TypeDRA, Name: "gpu.example.com", Endpoint: "/var/lib/kubelet/plugins/gpu.example.com/dra.sock", SupportedVersions: versions}
	}
	ep := func(a kubelet.Answer) *dra.Endpoint {
		return &dra.Endpoint{Path: "/var/lib/kubelet/plugins/gpu.example.com/dra.sock", Absolute: true, Dial: kubelet.Dial{Answer: a}}
	}
	answered := kubelet.Dial{Method: "GetInfo", Answer: kubelet.Answered}
	for _, c := range []struct {
		name string
		r    dra.Registration
		want string
	}{
		{"live", dra.Registration{Dial: answered, Info: info("v1.DRAPlugin"), Endpoint: ep(dra.Connected)}, "DRA_REGISTRATION_OK PASS"},
		{"endpoint refused", dra.Registration{Dial: answered, Info: info("v1.DRAPlugin"), Endpoint: ep(kubelet.Refused)}, "DRA_ENDPOINT_MISSING FAIL"},
		{"unsupported", dra.Registration{Dial: answered, Info: info("1.0.0"), Endpoint: ep(dra.Connected), Unsupported: true}, "DRA_UNSUPPORTED_VERSION FAIL"},
		{"dead", dra.Registration{Dial: kubelet.Dial{Method: "GetInfo", Answer: kubelet.Refused}}, "DRA_REGISTRATION_DEAD FAIL"},
		{"a device plugin's", dra.Registration{Dial: answered, Info: &dra.PluginInfo{Type: "DevicePlugin", Name: "x"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.r.Path, c.r.Name, c.r.Type = "/var/lib/kubelet/plugins_registry/gpu.example.com-reg.sock", "gpu.example.com-reg.sock", "socket"
			out := &Out{check: &Check{ID: "kube.dra", Layer: report.LayerKube}}
			judgeDRARegistration(out, &c.r)
			var got []string
			for _, f := range out.findings {
				got = append(got, f.Code+" "+string(f.Status))
				if f.Status == report.Pass && f.Subject != "gpu.example.com" {
					t.Errorf("%s names %q, want the driver", f.Code, f.Subject)
				}
			}
			if c.want == "" && len(got) != 0 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// A prepared claim whose CDI device cannot be resolved because a spec
// directory was not captured (the reboot tree without /var/run) is
// NOT_RUN with the directory as its reason, never silence and never the
// FAIL.
func TestDRAClaimCDIUnknownIsNotRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(draNodes+"dra-reboot")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "var/run")); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep := runFixture(t, root, "dra-reboot-without-var-run", Options{Layers: []report.Layer{report.LayerKube}})
	var notRun int
	for _, f := range rep.Findings {
		switch {
		case f.Code == "DRA_CLAIM_CDI_UNRESOLVED":
			t.Errorf("%s %s with /var/run/cdi not captured: %s", f.Code, f.Status, f.Summary)
		case f.Code == "DRA_CLAIM_CDI_NOT_CHECKED":
			notRun++
			if f.Status != report.NotRun || !strings.Contains(f.Reason, "/var/run/cdi") {
				t.Errorf("%s %s, reason %q: want NOT_RUN naming /var/run/cdi", f.Code, f.Status, f.Reason)
			}
		}
	}
	if notRun == 0 {
		t.Errorf("no DRA_CLAIM_CDI_NOT_CHECKED; got %v", draCodesOf(rep))
	}
}

func draCodesOf(rep *report.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Check == "kube.dra" {
			out = append(out, f.Code+" "+string(f.Status))
		}
	}
	return out
}
