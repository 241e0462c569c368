package kubecli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

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
}

func (f *draMockFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	cli.Flag(fl, "dra", ": run a fake one (see DRA below)").Bool(&f.dra, false)
	cli.Flag(fl, "driver", " to serve (--dra)").String(&f.driver, "gpu.example.com")
	cli.Flag(fl, "plugins-registry", ": the registration socket is made here (--dra)").String(&f.registryDir, "/var/lib/kubelet/plugins_registry")
	cli.Flag(fl, "plugin-data-dir", " (--dra; default /var/lib/kubelet/plugins/DRIVER)").String(&f.pluginDir, "")
	cli.Alias(fl, "plugin-dir", "", "plugin-data-dir", "")
	cli.Flag(fl, "cdi-spec-dir", " where the per-claim CDI specs are written (--dra)").String(&f.cdiDir, "/var/run/cdi")
	cli.Alias(fl, "cdi-dir", "", "cdi-spec-dir", "")
	cli.Flag(fl, "node-name", ": the ResourceSlice's node, and its pool's name (--dra; default: the host name)").String(&f.nodeName, "")
	cli.Flag(fl, "kubeconfig", ": with it the mock publishes a ResourceSlice and reads claims from the API server; without it nothing is published (--dra)").String(&f.kubeconfig, "")
	cli.Alias(fl, "prepare-error", "", "error", "")
}

func draMockHelp() string {
	var b strings.Builder
	b.WriteString(`
DRA (--dra --driver NAME): a fake DRA driver built on
k8s.io/dynamic-resource-allocation/kubeletplugin, with --devices fake devices
(dev-0 ... dev-N-1). It WRITES its registration socket in --plugins-registry,
its DRA service socket dra.sock in --plugin-data-dir, and one CDI spec per
prepared claim in --cdi-spec-dir (removed on unprepare and on exit).

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

func runDRAMock(ctx context.Context, g *cli.Globals, f *draMockFlags, mf cli.MockFlags) error {
	for _, p := range []string{f.registryDir, f.cdiDir} {
		if !filepath.IsAbs(p) {
			return cli.UsageErr("--dra: %q is not absolute (the kubelet dials registrations and endpoints by path)", p)
		}
	}
	if f.pluginDir != "" && !filepath.IsAbs(f.pluginDir) {
		return cli.UsageErr("--plugin-data-dir %q is not absolute", f.pluginDir)
	}
	log, err := kubeletcli.PluginLogger(g.Stderr(), mf.LogFormat, mf.Debug)
	if err != nil {
		return err
	}
	cfg := dramock.Config{Driver: f.driver, Devices: mf.Devices, Mode: dramock.Mode(mf.Mode), Error: mf.Error,
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

// draTestFlags are `plugin test --dra`'s own flags (it shares
// --cdi-spec-dir, --device-plugin-socket and --samples with the device
// plugin's side: cli.TestFlags).
type draTestFlags struct {
	dra         bool
	registryDir string
	driver      string
}

func (f *draTestFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	cli.Flag(fl, "dra", ": test one, acting as the kubelet's DRA side (see DRA below)").Bool(&f.dra, false)
	cli.Flag(fl, "plugins-registry", ": the driver registers in it (--dra)").String(&f.registryDir, "")
	cli.Flag(fl, "driver", " to test (--dra; default: the first DRA registration that answers)").String(&f.driver, "")
	cli.Alias(fl, "cdi-dir", "", "cdi-spec-dir", "")
}

const draTestHelp = `
DRA (--dra --plugins-registry DIR): the kubelet's side of DRA. It waits for
a registration socket in DIR (of --driver), calls GetInfo and then
NotifyRegistrationStatus, as the kubelet's plugin watcher does (this tells
the driver it was registered, or refused: it changes the driver's state, so
never point it at a node's real kubelet directory), dials the endpoint,
calls NodePrepareResources with claims it makes up (namespace
accel-doctor-test), resolves every answered CDI device ID against
--cdi-spec-dir (default /etc/cdi,/var/run/cdi), and NodeUnprepareResources
for each; with --device-plugin-socket, a device plugin there must not
advertise the devices the driver prepares. Codes DRA_PLUGIN_*; measured:
registration socket -> GetInfo, NodePrepareResources and
NodeUnprepareResources p50/p99. SIGINT or SIGTERM stops the test: a claim
it prepared is unprepared first (the driver removes its CDI spec), nothing
is reported, and it exits 128+N (130, 143).`

func runDRATest(ctx context.Context, g *cli.Globals, f *draTestFlags, tf cli.TestFlags) error {
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
	samples := tf.Samples
	if samples == 0 {
		samples = 20
	}
	// On SIGINT or SIGTERM the test stops, unprepares the claim it
	// prepared, and the run exits 128+N.
	cli.TakeCancel()
	res, err := dramock.Test(ctx, dramock.TestOptions{RegistryDir: dir, Driver: f.driver, CDIDirs: tf.CDISpecDirs,
		DevicePluginSocket: tf.DevicePluginSocket, Timeout: tf.Timeout, Samples: samples, Root: root})
	if ctx.Err() != nil {
		return context.Cause(ctx) // a test cut short judges nothing
	}
	if err != nil {
		return cli.UsageErr("%v", err)
	}
	return kubeletcli.RenderTest(g, "plugin test --dra", "dra "+dir, res.Findings, res.Measurements, tf.Verbose)
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
		AddMockFlags: func(cmd *cobra.Command) (func() bool, func(context.Context, *cli.Globals, cli.MockFlags) error) {
			f := &draMockFlags{}
			f.add(cmd)
			return func() bool { return f.dra }, func(ctx context.Context, g *cli.Globals, mf cli.MockFlags) error {
				return runDRAMock(ctx, g, f, mf)
			}
		},
		AddTestFlags: func(cmd *cobra.Command) (func() bool, func(context.Context, *cli.Globals, cli.TestFlags) error) {
			f := &draTestFlags{}
			f.add(cmd)
			return func() bool { return f.dra }, func(ctx context.Context, g *cli.Globals, tf cli.TestFlags) error {
				return runDRATest(ctx, g, f, tf)
			}
		},
	}
}
