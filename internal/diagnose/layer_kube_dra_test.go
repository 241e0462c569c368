package diagnose

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/accel-doctor/accel-doctor/internal/fixture"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// registrar answers GetInfo as a DRA driver's registration socket does.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo
}

func (r registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

// draDriver plants a DRA driver on the node: its plugin directory with
// dra.sock (accepting connections when live, left behind dead
// otherwise) and, when registered, its registration socket answering
// GetInfo with a version the kubelet speaks.
func (n *kubeNode) draDriver(name string, live, registered bool) {
	n.t.Helper()
	kdir := filepath.Dir(n.dir)
	dir := filepath.Join(kdir, "plugins", name)
	reg := filepath.Join(kdir, "plugins_registry")
	for _, d := range []string{dir, reg} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			n.t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "dra.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		n.t.Fatal(err)
	}
	if live {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				n.t.Cleanup(func() { c.Close() })
			}
		}()
		n.t.Cleanup(func() { l.Close() })
	} else {
		l.SetUnlinkOnClose(false)
		l.Close()
	}
	if !registered {
		return
	}
	rl, err := net.Listen("unix", filepath.Join(reg, name+"-reg.sock"))
	if err != nil {
		n.t.Fatal(err)
	}
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, registrar{info: &registerapi.PluginInfo{Type: "DRAPlugin", Name: name,
		Endpoint: "/var/lib/kubelet/plugins/" + name + "/dra.sock", SupportedVersions: []string{"v1.DRAPlugin"}}})
	go s.Serve(rl)
	n.t.Cleanup(s.Stop)
}

func kubeReport(t *testing.T, n *kubeNode) *report.Report {
	t.Helper()
	return runFixture(t, n.fs, "dra-node", Options{})
}

// statusOf counts layer 6's findings by "CODE STATUS".
func statusOf(rep *report.Report) map[string]int {
	got := map[string]int{}
	for _, f := range rep.Findings {
		if f.Layer == report.LayerKube {
			got[f.Code+" "+string(f.Status)]++
		}
	}
	return got
}

// A node whose GPUs its vendor's DRA driver hands out, with no device
// plugin, is healthy: no FAIL, and each GPU is PASS as served by DRA.
func TestDRAOnlyNodeIsHealthy(t *testing.T) {
	h, _ := fixture.ByName(fixture.NameNVIDIAx8)
	n := newKubeNode(t, h)
	n.serve(kubelet.KubeletSocketName, false, n.t0)
	n.draDriver("gpu.nvidia.com", true, true)
	rep := kubeReport(t, n)
	got := statusOf(rep)
	for k := range got {
		if strings.HasSuffix(k, " FAIL") || strings.HasSuffix(k, " WARN") {
			t.Errorf("a DRA-only node: %s; all: %v", k, kubeKeys(got))
		}
	}
	if got["KUBELET_ACCELERATOR_SERVED_BY_DRA PASS"] != 8 || got["DRA_REGISTRATION_OK PASS"] != 1 {
		t.Errorf("want 8 GPUs served by gpu.nvidia.com and its registration PASS; got %v", kubeKeys(got))
	}
}

// The vendor's DRA driver installed and not running (dra.sock refuses,
// no registration): its own FAIL names it, and the GPUs that nothing
// serves follow from it; the verdict names it as the cause.
func TestDRADriverInstalledNotRunning(t *testing.T) {
	h, _ := fixture.ByName(fixture.NameNVIDIAx8)
	n := newKubeNode(t, h)
	n.serve(kubelet.KubeletSocketName, false, n.t0)
	n.draDriver("gpu.nvidia.com", false, false)
	rep := kubeReport(t, n)
	got := statusOf(rep)
	if got["DRA_DRIVER_NOT_RUNNING FAIL"] != 1 || got["KUBELET_NO_PLUGIN_FOR_ACCELERATOR FAIL"] != 8 {
		t.Fatalf("got %v", kubeKeys(got))
	}
	for _, f := range rep.Findings {
		switch f.Code {
		case "DRA_DRIVER_NOT_RUNNING":
			if f.Subject != "gpu.nvidia.com" || !strings.Contains(f.Summary, `"DRA driver gpu.nvidia.com is not registered"`) {
				t.Errorf("%+v", f)
			}
		case "KUBELET_NO_PLUGIN_FOR_ACCELERATOR":
			if f.CausedBy == nil || *f.CausedBy != (report.Cause{Code: "DRA_DRIVER_NOT_RUNNING", Subject: "gpu.nvidia.com"}) {
				t.Errorf("%s %s: caused by %+v, want the DRA driver's finding", f.Code, f.Subject, f.CausedBy)
			}
			if !strings.Contains(f.Summary, "no DRA driver (gpu.nvidia.com or compute-domain.nvidia.com)") || !strings.Contains(f.Summary, "nvidia.com/gpu") {
				t.Errorf("the FAIL does not name both sides: %q", f.Summary)
			}
		}
	}
	if c := rep.Verdict.Cause; c == nil || c.Code != "DRA_DRIVER_NOT_RUNNING" {
		t.Errorf("verdict cause %+v (%s)", c, rep.Verdict.Summary)
	}
}

// A dead kubelet: the GPUs no plugin serves follow from kubelet.sock.
func TestNoPluginFollowsFromTheKubelet(t *testing.T) {
	h, _ := fixture.ByName(fixture.NameNVIDIAx8)
	n := newKubeNode(t, h)
	n.dead(kubelet.KubeletSocketName, n.t0)
	rep := kubeReport(t, n)
	got := statusOf(rep)
	if got["KUBELET_SOCKET_NOT_ANSWERING FAIL"] != 1 || got["KUBELET_NO_PLUGIN_FOR_ACCELERATOR FAIL"] != 8 {
		t.Fatalf("got %v", kubeKeys(got))
	}
	for _, f := range rep.Findings {
		if f.Code == "KUBELET_NO_PLUGIN_FOR_ACCELERATOR" && (f.CausedBy == nil || f.CausedBy.Code != "KUBELET_SOCKET_NOT_ANSWERING") {
			t.Errorf("%s: caused by %+v", f.Subject, f.CausedBy)
		}
	}
}

// What could not be read is NOT_RUN, never the FAIL: a registration
// directory that is not a directory's to list, and a registered DRA
// driver of no known vendor (it may publish the GPUs).
func TestNoPluginUnknownWhenDRAUnknown(t *testing.T) {
	h, _ := fixture.ByName(fixture.NameNVIDIAx8)
	t.Run("registry unreadable", func(t *testing.T) {
		n := newKubeNode(t, h)
		n.serve(kubelet.KubeletSocketName, false, n.t0)
		// A file where the directory should be; loops and permissions
		// are read the same way (kubelet.State).
		if err := os.WriteFile(filepath.Join(filepath.Dir(n.dir), "plugins_registry"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		got := statusOf(kubeReport(t, n))
		if got["KUBELET_NO_PLUGIN_FOR_ACCELERATOR NOT_RUN"] != 8 || got["KUBELET_NO_PLUGIN_FOR_ACCELERATOR FAIL"] != 0 {
			t.Errorf("got %v", kubeKeys(got))
		}
	})
	t.Run("a generic DRA driver", func(t *testing.T) {
		n := newKubeNode(t, h)
		n.serve(kubelet.KubeletSocketName, false, n.t0)
		n.draDriver("gpu.example.com", true, true)
		rep := kubeReport(t, n)
		got := statusOf(rep)
		if got["KUBELET_NO_PLUGIN_FOR_ACCELERATOR NOT_RUN"] != 8 || got["KUBELET_NO_PLUGIN_FOR_ACCELERATOR FAIL"] != 0 {
			t.Errorf("got %v", kubeKeys(got))
		}
		for _, f := range rep.Findings {
			if f.Code == "KUBELET_NO_PLUGIN_FOR_ACCELERATOR" && !strings.Contains(f.Reason, "gpu.example.com") {
				t.Errorf("reason %q does not name the driver", f.Reason)
			}
		}
	})
}
