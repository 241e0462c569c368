package kubecli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletcli"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/dramock"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// draMockFlags are `plugin mock --dra`'s own flags.
type draMockFlags struct {
	dra         bool
	driver      string
	registryDir string
	pluginDir   string
	cdiDir      string
	nodeName    string
	kubeconfig  string
	err         string
}

func (f *draMockFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.dra, "dra", false, "run a fake DRA driver instead of a device plugin (see DRA below)")
	fl.StringVar(&f.driver, "driver", "gpu.example.com", "--dra: the DRA driver name")
	fl.StringVar(&f.registryDir, "plugins-registry", "/var/lib/kubelet/plugins_registry", "--dra: the kubelet's plugin registration directory")
	fl.StringVar(&f.pluginDir, "plugin-dir", "", "--dra: the driver's data directory, where dra.sock is made (default /var/lib/kubelet/plugins/DRIVER)")
	fl.StringVar(&f.cdiDir, "cdi-dir", "/var/run/cdi", "--dra: where the per-claim CDI specs are written")
	fl.StringVar(&f.nodeName, "node-name", "", "--dra: the node the ResourceSlice is for (default: the host name); the pool's name")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "--dra: a kubeconfig; with it the mock publishes a ResourceSlice and reads claims from the API server; without it nothing is published")
	fl.StringVar(&f.err, "prepare-error", "mock: preparation refused", "--dra, prepare-error: the error NodePrepareResources answers")
}

func draMockHelp() string {
	var b strings.Builder
	b.WriteString(`
DRA (--dra --driver NAME): a fake DRA driver built on
k8s.io/dynamic-resource-allocation/kubeletplugin, with --devices fake devices
(dev-0 ... dev-N-1). It WRITES its registration socket in --plugins-registry,
its DRA service socket dra.sock in --plugin-dir, and one CDI spec per
prepared claim in --cdi-dir (removed on unprepare and on exit).

Without --kubeconfig there is no API server: no ResourceSlice is published,
and each claim the kubelet side asks to prepare is held in an in-memory
client (kubeletplugin looks claims up by name), allocated to the next
fake device. With --kubeconfig the mock publishes a ResourceSlice of its
devices for --node-name and reads claims from the API server.

DRA modes (--mode):
`)
	for _, d := range dramock.ModeDocs {
		fmt.Fprintf(&b, "  %s\n      %s\n      Symptom: %s\n", d.Mode, d.Does, d.Symptom)
	}
	b.WriteString(`
stdout gets one line per event: "SERVING DRIVER dra.sock", "REGISTRATION DRIVER
socket" (the registration socket serves, for the kubelet to find),
"REGISTERED DRIVER socket" (the kubelet's NotifyRegistrationStatus said
registered and the kubelet then closed that connection: the registration
is complete on both sides), "REGISTER_FAILED DRIVER \"ERR\""
(it said not registered, and why), "PUBLISHED DRIVER ...", "STOPPED DRIVER".
SIGTERM or SIGINT: it stops.`)
	return b.String()
}

func runDRAMock(ctx context.Context, g *cli.Globals, f *draMockFlags, mode string, devices int, logFormat string, debug bool) error {
	for _, p := range []string{f.registryDir, f.cdiDir} {
		if !filepath.IsAbs(p) {
			return cli.UsageErr("--dra: %q is not absolute (the kubelet dials registrations and endpoints by path)", p)
		}
	}
	if f.pluginDir != "" && !filepath.IsAbs(f.pluginDir) {
		return cli.UsageErr("--plugin-dir %q is not absolute", f.pluginDir)
	}
	log, err := kubeletcli.PluginLogger(g.Stderr(), logFormat, debug)
	if err != nil {
		return err
	}
	cfg := dramock.Config{Driver: f.driver, Devices: devices, Mode: dramock.Mode(mode), Error: f.err,
		RegistryDir: f.registryDir, PluginDir: f.pluginDir, CDIDir: f.cdiDir, NodeName: f.nodeName}
	if cfg.NodeName == "" {
		cfg.NodeName = hostName()
	}
	if f.kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		if err != nil {
			return cli.UsageErr("--kubeconfig: %v", err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return cli.UsageErr("--kubeconfig: %v", err)
		}
		cfg.Kube = cs
	}
	var mu sync.Mutex
	m, err := dramock.New(cfg, log, func(e dramock.Event) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(g.Stdout(), "%s %s %s\n", e.Kind, f.driver, e.Detail)
	})
	if err != nil {
		return cli.UsageErr("%v", err)
	}
	cli.TakeStop()
	return m.Run(ctx)
}

// draTestFlags are `plugin test --dra`'s own flags.
type draTestFlags struct {
	dra         bool
	registryDir string
	driver      string
	cdiDirs     []string
	dpSocket    string
	samples     int
}

func (f *draTestFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.dra, "dra", false, "test a DRA driver, acting as the kubelet's DRA side (see DRA below)")
	fl.StringVar(&f.registryDir, "plugins-registry", "", "--dra: the plugins_registry directory the driver registers in")
	fl.StringVar(&f.driver, "driver", "", "--dra: the driver to test (default: the first DRA registration that answers)")
	fl.StringSliceVar(&f.cdiDirs, "cdi-dir", nil, "--dra: CDI spec directories the answered CDI IDs must resolve in (default /etc/cdi,/var/run/cdi)")
	fl.StringVar(&f.dpSocket, "device-plugin-socket", "", "--dra: a device plugin socket whose devices must not be the driver's (double advertising)")
	fl.IntVar(&f.samples, "samples", 20, "--dra: claims prepared and unprepared for the latencies")
}

const draTestHelp = `
DRA (--dra --plugins-registry DIR): the kubelet's side of DRA. It waits for
a registration socket in DIR (of --driver), calls GetInfo and then
NotifyRegistrationStatus, as the kubelet's plugin watcher does (this tells
the driver it was registered, or refused: it changes the driver's state, so
never point it at a node's real kubelet directory), dials the endpoint,
calls NodePrepareResources with claims it makes up (namespace
accel-doctor-test), resolves every answered CDI device ID against --cdi-dir,
and NodeUnprepareResources for each. Codes DRA_PLUGIN_*; measured:
registration socket -> GetInfo, NodePrepareResources and
NodeUnprepareResources p50/p99. SIGINT or SIGTERM stops the test: a claim
it prepared is unprepared first (the driver removes its CDI spec), nothing
is reported, and it exits 128+N (130, 143).`

func runDRATest(ctx context.Context, g *cli.Globals, f *draTestFlags, timeout time.Duration, verbose bool) error {
	if f.registryDir == "" {
		return cli.UsageErr("--dra needs --plugins-registry DIR")
	}
	dir, err := filepath.Abs(f.registryDir)
	if err != nil {
		return cli.UsageErr("--plugins-registry: %v", err)
	}
	root, err := hostfs.New(g.RootDir())
	if err != nil {
		return cli.UsageErr("%v", err)
	}
	// On SIGINT or SIGTERM the test stops, unprepares the claim it
	// prepared, and the run exits 128+N.
	cli.TakeCancel()
	res, err := dramock.Test(ctx, dramock.TestOptions{RegistryDir: dir, Driver: f.driver, CDIDirs: f.cdiDirs,
		DevicePluginSocket: f.dpSocket, Timeout: timeout, Samples: f.samples, Root: root})
	if ctx.Err() != nil {
		return context.Cause(ctx) // a test cut short judges nothing
	}
	if err != nil {
		return cli.UsageErr("%v", err)
	}
	return kubeletcli.RenderTest(g, "plugin test --dra", "dra "+dir, res.Findings, res.Measurements, verbose)
}

// hostName is the node name a DRA driver uses by default (the kubelet's
// default --hostname-override is the host name, lowercased).
func hostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.ToLower(h)
}

// draPlugin is the plugin command's DRA side (cli.DRAPlugin).
func draPlugin() *cli.DRAPlugin {
	return &cli.DRAPlugin{
		MockHelp: draMockHelp(),
		TestHelp: draTestHelp,
		Modes:    dramock.Modes(),
		AddMockFlags: func(cmd *cobra.Command) (func() bool, func(context.Context, *cli.Globals, string, int, string, bool) error) {
			f := &draMockFlags{}
			f.add(cmd)
			return func() bool { return f.dra }, func(ctx context.Context, g *cli.Globals, mode string, devices int, logFormat string, debug bool) error {
				return runDRAMock(ctx, g, f, mode, devices, logFormat, debug)
			}
		},
		AddTestFlags: func(cmd *cobra.Command) (func() bool, func(context.Context, *cli.Globals, time.Duration, bool) error) {
			f := &draTestFlags{}
			f.add(cmd)
			return func() bool { return f.dra }, func(ctx context.Context, g *cli.Globals, timeout time.Duration, verbose bool) error {
				return runDRATest(ctx, g, f, timeout, verbose)
			}
		},
	}
}
