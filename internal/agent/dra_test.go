package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/accel-doctor/accel-doctor/internal/diagnose"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo
}

func (r registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

func (r registrar) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	return &registerapi.RegistrationStatusResponse{}, nil
}

func listenUnix(t *testing.T, p string) net.Listener {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// draHost is a node root whose kubelet has two DRA registrations: a live
// one of gpu.example.com (GetInfo answers, its endpoint accepts) and one
// left behind by net.example.com (nobody listens: refused).
func draHost(t *testing.T) string {
	dir, err := os.MkdirTemp("", "agdra") // socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kdir := filepath.Join(dir, "var/lib/kubelet")
	ep := listenUnix(t, filepath.Join(kdir, "plugins/gpu.example.com/dra.sock"))
	go func() {
		for {
			c, err := ep.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	s := grpc.NewServer()
	registerapi.RegisterRegistrationServer(s, registrar{info: &registerapi.PluginInfo{Type: "DRAPlugin", Name: "gpu.example.com",
		Endpoint: "/var/lib/kubelet/plugins/gpu.example.com/dra.sock", SupportedVersions: []string{"v1.DRAPlugin"}}})
	go s.Serve(listenUnix(t, filepath.Join(kdir, "plugins_registry/gpu.example.com-reg.sock")))
	t.Cleanup(s.Stop)
	// A socket file nobody serves: bind, then close the listener
	// without unlinking it.
	dead := listenUnix(t, filepath.Join(kdir, "plugins_registry/net.example.com-reg.sock"))
	dead.(*net.UnixListener).SetUnlinkOnClose(false)
	dead.Close()
	return dir
}

func checkRoot(t *testing.T, dir string, layers ...report.Layer) func() (*report.Report, *diagnose.Env) {
	root, err := hostfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return func() (*report.Report, *diagnose.Env) {
		env := diagnose.NewEnv(root, diagnose.Options{Layers: layers, KubeletRPC: grpccall.Caller{}})
		return diagnose.Run(env, diagnose.Registry(), diagnose.Meta{Tool: "test", Command: "agent"}), env
	}
}

// The summary carries the drivers kube.dra found registered: the live
// one, not the dead one; it reads back as known.
func TestSummaryDRARegistered(t *testing.T) {
	a := New(Config{Node: "n", Interval: time.Minute, Check: checkRoot(t, draHost(t), report.LayerKube)})
	s := a.RunOnce()
	dead := false
	for _, f := range s.Report.Findings {
		dead = dead || f.Code == "DRA_REGISTRATION_DEAD" && f.Subject == "net.example.com-reg.sock"
	}
	if !dead {
		t.Errorf("kube.dra did not see the dead registration: %+v", s.Report.Findings)
	}
	got := roundTrip(t, s.Summary)
	drivers, known, why := got.DRARegistrations()
	if !known || !slices.Equal(drivers, []string{"gpu.example.com"}) {
		t.Errorf("summary DRA %+v: drivers %v known %v (%s)", got.DRA, drivers, known, why)
	}
}

// What was not judged stays unknown, never "none": a root without the
// kubelet's directory, a check that did not run layer 6, a run without
// an environment.
func TestSummaryDRANotJudged(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func() (*report.Report, *diagnose.Env)
		why   string
	}{
		{"no kubelet", checkOf(t, "nvidia-h100x8"), "/var/lib/kubelet/plugins_registry: not-captured"},
		{"no registry", checkRoot(t, func() string {
			d := t.TempDir()
			os.MkdirAll(filepath.Join(d, "var/lib/kubelet/device-plugins"), 0o755)
			return d
		}(), report.LayerKube), "plugins_registry is absent"},
		{"layer 6 not run", checkRoot(t, draHost(t), report.LayerPCI), "kube.dra did not run"},
		{"no environment", notRunOnly, "no check environment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(Config{Node: "n", Interval: time.Minute, Check: c.check}).RunOnce()
			got := roundTrip(t, s.Summary)
			drivers, known, why := got.DRARegistrations()
			if known || len(drivers) != 0 || !strings.Contains(why, c.why) {
				t.Errorf("summary DRA %+v: drivers %v known %v (%s), want not known: %q", got.DRA, drivers, known, why, c.why)
			}
		})
	}
}
