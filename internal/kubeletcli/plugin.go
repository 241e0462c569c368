package kubeletcli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/report"
	"github.com/accel-doctor/accel-doctor/internal/trim"
)

func NewPluginCmd(g *cli.Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Kubernetes device plugins: a generic plugin (serve), a mock with planted failures (mock), and a kubelet-side tester (test)",
	}
	cmd.AddCommand(newPluginServeCmd(g), newPluginMockCmd(g), newPluginTestCmd(g))
	return cmd
}

// PluginLogger logs to stderr: text, or JSON with --log-format json.
func PluginLogger(w io.Writer, format string, debug bool) (*slog.Logger, error) {
	lvl := slog.LevelInfo
	if debug {
		lvl = slog.LevelDebug
	}
	o := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, cli.UsageErr("--log-format %q: want text or json", format)
}

// printEvents prints each Event as one line on stdout: what a script (or
// the e2e suite) waits for.
func printEvents(w io.Writer) func(deviceplugin.Event) {
	var mu sync.Mutex
	return func(e deviceplugin.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Err != nil {
			fmt.Fprintf(w, "%s %s %s %s\n", e.Kind, e.Resource, e.Socket, strconv.Quote(e.Err.Error()))
			return
		}
		fmt.Fprintf(w, "%s %s %s\n", e.Kind, e.Resource, e.Socket)
	}
}

// daemonFlags are serve's and mock's common flags.
type daemonFlags struct {
	kubeletDir string
	logFormat  string
	debug      bool
}

func (f *daemonFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	cli.Flag(fl, "device-plugin-dir", "; the plugin's socket is made here").String(&f.kubeletDir, deviceplugin.DefaultKubeletDir)
	cli.Alias(fl, "kubelet-dir", "", "device-plugin-dir", "--kubelet-root-dir is the kubelet's --root-dir")
	cli.Flag(fl, "log-format", "").String(&f.logFormat, "text")
	cli.Flag(fl, "debug", "").Bool(&f.debug, false)
}

func (f *daemonFlags) check() error {
	if !filepath.IsAbs(f.kubeletDir) {
		return cli.UsageErr("--device-plugin-dir %q is not absolute (the kubelet registers sockets by path)", f.kubeletDir)
	}
	return nil
}

func newPluginServeCmd(g *cli.Globals) *cobra.Command {
	var (
		f       daemonFlags
		config  string
		metrics string
	)
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--device-plugin-dir DIR]",
		Short: "Run a generic device plugin for the resources of a config file (WRITES sockets and CDI specs)",
		Long: `serve is a Kubernetes device plugin. The config file (YAML; see
docs/device-plugin.md and docs/plugin-config.example.yaml) declares resources:
a name, a selector (PCI vendor/device/class/driver, or device-node globs),
what a container gets (device nodes, mounts, env), and whether Allocate
answers with CDI device names or with DeviceSpecs.

It WRITES to the host: one socket per resource in the kubelet's
device-plugins directory (--device-plugin-dir), and, for CDI resources, a CDI
spec accel-doctor-VENDOR-CLASS.json in the config's cdiSpecDir
(/var/run/cdi by default), under --root. It reads devices through --root.

Each resource is served on its socket before it is registered (the socket
must answer first), and registered again whenever the kubelet recreates
kubelet.sock. Health is event-driven: fsnotify on /dev and the devices'
sysfs directories, and the kernel's uevents (a NETLINK_KOBJECT_UEVENT
socket that only listens; the kernel sends device uevents to every network
namespace of the host's user namespace, so a pod needs no hostNetwork, but
none reach a pod with hostUsers: false), with a periodic rescan as the
fallback.

A config with no resources (resources: []) is valid: serve then makes no
socket, registers nothing, logs why and runs until stopped. A resource that
selects no device on the node is registered with none, and logged.

stdout gets one line per event: "SERVING RESOURCE SOCKET" once the socket
answers, "REGISTERED RESOURCE SOCKET" each time the kubelet accepts it,
"WAITING RESOURCE SOCKET" when there is no kubelet.sock yet, and
"REGISTER_FAILED RESOURCE SOCKET \"ERROR\"". Logs go to stderr (slog).
SIGTERM or SIGINT: the sockets are removed and it exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if config == "" {
				return cli.UsageErr("--config FILE is required")
			}
			fh, err := os.Open(config)
			if err != nil {
				return cli.UsageErr("--config: %v", err)
			}
			cfg, err := deviceplugin.ParseConfig(fh)
			fh.Close()
			if err != nil {
				return cli.UsageErr("%s: %v", config, err)
			}
			log, err := PluginLogger(g.Stderr(), f.logFormat, f.debug)
			if err != nil {
				return err
			}
			root, err := hostfs.New(g.RootDir())
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			p, err := deviceplugin.New(f.kubeletDir, cfg, deviceplugin.Options{Root: root, Logger: log, Registerer: reg, Notify: printEvents(g.Stdout())})
			if err != nil {
				return err
			}
			cli.TakeStop()
			ctx := cmd.Context()
			if metrics != "" {
				stop, err := serveMetrics(metrics, reg, log)
				if err != nil {
					return cli.UsageErr("--metrics-address: %v", err)
				}
				defer stop()
			}
			trim.Later()
			return p.Run(ctx)
		},
	}
	f.add(cmd)
	g.AddRootFlag(cmd)
	cmd.Flags().StringVar(&config, "config", "", "the plugin's config file (YAML)")
	cli.Flag(cmd.Flags(), "metrics-address", " (e.g. 127.0.0.1:9464; default off)").String(&metrics, "")
	return cmd
}

func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis)
	log.Info("metrics", "address", lis.Addr().String())
	return func() { srv.Close() }, nil
}

func newPluginMockCmd(g *cli.Globals) *cobra.Command {
	var (
		f  daemonFlags
		mc deviceplugin.MockConfig
		md string
	)
	dra := draPlugin(g)
	var (
		draGiven func() bool
		draRun   func(context.Context, *cli.Globals, cli.MockFlags) error
	)
	var modes strings.Builder
	for _, d := range deviceplugin.ModeDocs {
		fmt.Fprintf(&modes, "  %s\n      %s\n      Symptom: %s\n", d.Mode, d.Does, d.Symptom)
	}
	cmd := &cobra.Command{
		Use:   "mock --resource NAME --devices N --mode MODE [--device-plugin-dir DIR] | mock --dra --driver NAME [--mode MODE]",
		Short: "Run a fake device plugin that plants one failure, to reproduce it in a test cluster (WRITES a socket)",
		Long: `mock is a fake device plugin with N fake devices (mock-0 ... mock-N-1) and
one planted failure, to reproduce in a test cluster what users report against
device plugins. It WRITES its socket (two in mode duplicate) in
--device-plugin-dir; it touches no device.

Modes (MODE=ARG sets the mode's argument: flapping=500ms, slow-allocate=2s,
fail-allocate="text"):
` + modes.String() + `
SIGUSR1 flips the health of mock-0 and sends the new list at once: the
trigger 'accel-doctor plugin test' uses to time a health change (it signals
only a process whose command line is accel-doctor's plugin mock, found
through the socket's peer credentials).

Every mode plants its failure whichever starts first, the mock or the
kubelet ('plugin test --device-plugin-dir'): a mock started first waits for
kubelet.sock and registers when it appears, as a real plugin does.

stdout gets the same event lines as 'plugin serve' ("SERVING ...",
"WAITING ...", "REGISTERED ...", "REGISTER_FAILED ..."); SIGTERM or SIGINT:
the socket is removed and it exits 0.` + dra.MockHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if draGiven() {
				return draRun(cmd.Context(), g, cli.MockFlags{Mode: md, Devices: mc.Devices, Error: mc.Error, LogFormat: f.logFormat, Debug: f.debug})
			}
			if err := f.check(); err != nil {
				return err
			}
			mode, arg, hasArg := strings.Cut(md, "=")
			mc.Mode = deviceplugin.MockMode(mode)
			if hasArg {
				switch mc.Mode {
				case deviceplugin.ModeFlapping, deviceplugin.ModeDuplicate:
					d, err := time.ParseDuration(arg)
					if err != nil {
						return cli.UsageErr("--mode %s: %v", md, err)
					}
					mc.Interval = d
				case deviceplugin.ModeSlowAllocate:
					d, err := time.ParseDuration(arg)
					if err != nil {
						return cli.UsageErr("--mode %s: %v", md, err)
					}
					mc.Delay = d
				case deviceplugin.ModeFailAllocate:
					mc.Error = arg
				default:
					return cli.UsageErr("--mode %s takes no argument", mode)
				}
			}
			log, err := PluginLogger(g.Stderr(), f.logFormat, f.debug)
			if err != nil {
				return err
			}
			m, err := deviceplugin.NewMock(f.kubeletDir, mc, deviceplugin.Options{Logger: log, Notify: printEvents(g.Stdout())})
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			cli.TakeStop()
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			usr1 := make(chan os.Signal, 1)
			signal.Notify(usr1, syscall.SIGUSR1)
			defer signal.Stop(usr1)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case <-usr1:
						if err := m.ToggleHealth(""); err != nil {
							log.Warn("SIGUSR1", "err", err)
						}
					}
				}
			}()
			return m.Run(ctx)
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&mc.Resource, "resource", "fake.example.com/gpu", "the extended resource name to register")
	fl.IntVar(&mc.Devices, "devices", 2, "number of fake devices")
	fl.StringVar(&md, "mode", "healthy", "the failure to plant: "+strings.Join(deviceplugin.Modes(), ", ")+draModes(dra))
	cli.Flag(fl, "interval", " of the planted failure: flapping's health flips, duplicate's resent lists").Duration(&mc.Interval, time.Second)
	fl.DurationVar(&mc.Delay, "delay", 5*time.Second, "slow-allocate: how long Allocate takes")
	cli.Flag(fl, "error", ` (fail-allocate: Allocate's, default "mock: allocation refused"`+draError(dra)+")").String(&mc.Error, "")
	fl.StringVar(&mc.Socket, "socket-name", "", "the socket's file name in --device-plugin-dir (default accel-doctor-mock-<domain>_<name>.sock)")
	draGiven, draRun = dra.AddMockFlags(cmd)
	return cmd
}

func newPluginTestCmd(g *cli.Globals) *cobra.Command {
	var (
		o         deviceplugin.TestOptions
		noRereg   bool
		noTrigger bool
		verbose   bool
		socket    string
		samples   int
	)
	dra := draPlugin(g)
	var (
		draGiven func() bool
		draRun   func(context.Context, *cli.Globals, cli.TestFlags) error
	)
	cmd := &cobra.Command{
		Use:   "test (--device-plugin-dir DIR | --device-plugin-socket PATH | --dra --plugins-registry DIR) [--timeout D]",
		Short: "Check a device plugin against the kubelet's contract, acting as the kubelet, and time it",
		Long: `test is the kubelet side of the device-plugin API.

With --device-plugin-dir DIR it acts as the kubelet's device manager of
1.37: it serves DIR/kubelet.sock (refusing if something answers there
already: never point it at a live kubelet's directory), accepts Register as
the kubelet does (API version, extended resource name, the endpoint dialled
back until its gRPC connection is ready, GetDevicePluginOptions, a second
Register from a socket it is connected to refused, then ListAndWatch on that
connection), checks each plugin on that connection and stream, and finally
restarts as a kubelet does: kubelet.sock and the registered plugins' sockets
are removed and kubelet.sock served again, and each plugin must register
again, be accepted and list its devices: within --timeout, or it is a WARN
with the figure; not back within a minute, a FAIL (the kubelet itself keeps
the resource 5 minutes). --no-reregister skips that. With
--device-plugin-socket PATH it dials a plugin directly and checks the calls
only.

The checks (codes PLUGIN_*, listed with their meaning and the kubelet code
each mirrors in docs/device-plugin.md): GetDevicePluginOptions, and
Register's options against it; ListAndWatch (every list's IDs unique and of
at most 63 characters, health values valid, NUMA nodes this host has, given
to all devices or none; the last list's health, which the node advertises;
health changes and devices left out during --watch; the stream kept open to
the end); GetPreferredAllocation when advertised (size and must-include
honoured); Allocate of one device and of two (one container response; host
paths of device specs and mounts exist on this host and each container path
is given once, CDI names resolve against its specs in --cdi-spec-dir, env
names valid; an unknown ID refused); PreStartContainer when required.

It measures and prints: registration -> first ListAndWatch, a health
change -> the ListAndWatch update (only against accel-doctor's plugin mock,
which it signals with SIGUSR1 after checking, through the socket's peer
credentials, that the process is one), Allocate p50/p99, and kubelet.sock
recreated -> Register.

It writes only DIR/kubelet.sock (removed at the end) and, when it restarts,
removes in DIR the sockets of the plugins that registered with it, as a
starting kubelet removes every socket there. Exit status: 0 no FAIL;
1 at least one FAIL; 2 a usage error, or nothing could be judged. SIGINT or
SIGTERM stops the test where it is: kubelet.sock is removed, nothing is
reported, and it exits 128+N (130, 143).` + dra.TestHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, d := range o.CDISpecDirs {
				if !strings.HasPrefix(d, "/") {
					return cli.UsageErr("--cdi-spec-dir %q is not a host-absolute path", d)
				}
			}
			if draGiven() {
				return draRun(cmd.Context(), g, cli.TestFlags{Timeout: o.Timeout, Verbose: verbose, CDISpecDirs: o.CDISpecDirs,
					DevicePluginSocket: socket, Samples: samples})
			}
			o.Socket, o.AllocateSamples = socket, samples
			if (o.KubeletDir == "") == (o.Socket == "") {
				return cli.UsageErr("give exactly one of --device-plugin-dir DIR and --device-plugin-socket PATH")
			}
			if o.KubeletDir != "" && !filepath.IsAbs(o.KubeletDir) {
				abs, err := filepath.Abs(o.KubeletDir)
				if err != nil {
					return cli.UsageErr("--device-plugin-dir: %v", err)
				}
				o.KubeletDir = abs
			}
			if o.Socket != "" {
				if fi, err := os.Stat(o.Socket); err != nil {
					return cli.UsageErr("--device-plugin-socket: %v", err)
				} else if fi.Mode()&os.ModeSocket == 0 {
					return cli.UsageErr("--device-plugin-socket %s is not a socket", o.Socket)
				}
			}
			root, err := hostfs.New(g.RootDir())
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			o.Root = root
			o.Reregister = !noRereg
			if !noTrigger {
				o.Trigger, o.TriggerNote = mockTrigger(o)
			} else {
				o.TriggerNote = "--no-trigger"
			}
			// On SIGINT or SIGTERM the test stops where it is, its
			// kubelet.sock is removed, and the run exits 128+N.
			cli.TakeCancel()
			ctx := cmd.Context()
			res, err := deviceplugin.Test(ctx, o)
			if ctx.Err() != nil {
				return context.Cause(ctx) // a test cut short judges nothing
			}
			if err != nil {
				return cli.UsageErr("%v", err)
			}
			target := o.Socket
			if target == "" {
				target = filepath.Join(o.KubeletDir, deviceplugin.KubeletSocket)
			}
			return RenderTest(g, "plugin test", "plugin "+target, res.Findings, res.Measurements, verbose)
		},
	}
	fl := cmd.Flags()
	g.AddRootFlag(cmd)
	cli.Flag(fl, "device-plugin-dir", ": act as the kubelet, serve kubelet.sock there and test the plugins that register").String(&o.KubeletDir, "")
	cli.Alias(fl, "kubelet-dir", "", "device-plugin-dir", "--kubelet-root-dir is the kubelet's --root-dir")
	cli.Flag(fl, "device-plugin-socket", ": dial it directly and test it"+draSocket(dra)).String(&socket, "")
	cli.Alias(fl, "socket", "", "device-plugin-socket", "")
	cli.Flag(fl, "cdi-spec-dir", cli.CDISpecDirsHelp).StringSlice(&o.CDISpecDirs, nil)
	fl.DurationVar(&o.Timeout, "timeout", 10*time.Second, "bound of each wait: for Register, a call, the first list, a health update")
	fl.DurationVar(&o.Watch, "watch", 2*time.Second, "how long ListAndWatch is watched for health changes nobody made")
	cli.Flag(fl, "samples", ": Allocate calls (default 100; fewer when they are slow: at most 2 s are spent)"+draSamples(dra)).Int(&samples, 0)
	cli.Alias(fl, "allocate-samples", "", "samples", "")
	fl.BoolVar(&noRereg, "no-reregister", false, "with --device-plugin-dir: do not recreate kubelet.sock to test re-registration")
	fl.BoolVar(&noTrigger, "no-trigger", false, "do not signal accel-doctor's mock to time a health change")
	cli.Flag(fl, "verbose", "").Bool(&verbose, false)
	draGiven, draRun = dra.AddTestFlags(cmd)
	g.AddOutputFlag(cmd)
	return cmd
}

// RenderTest prints a plugin tester's findings as a report, then what it
// timed (not in JSON), and ends with the report's exit status: plugin
// test's and plugin test --dra's.
func RenderTest(g *cli.Globals, command, source string, findings []report.Finding, ms []deviceplugin.Measurement, verbose bool) error {
	rep := &report.Report{
		SchemaVersion: report.SchemaVersion, Tool: "accel-doctor " + cli.Version, Command: command,
		Source: source, Root: g.RootDir(), Generated: time.Now().UTC(),
		Layers: []report.Layer{report.LayerKube}, Devices: []report.Device{}, Findings: findings,
	}
	rep.Decide()
	if err := g.Render(rep, verbose); err != nil {
		return err
	}
	if g.Output() != "json" {
		fmt.Fprintln(g.Stdout())
		if err := g.RenderTable(MeasurementTable(ms), nil); err != nil {
			return err
		}
	}
	return cli.ExitFor(rep)
}

// MeasurementTable is what was timed.
func MeasurementTable(ms []deviceplugin.Measurement) *report.Table {
	t := &report.Table{Title: []string{"Measured:"}, Header: []string{"WHAT", "SAMPLES", "P50", "P99", "MAX"}}
	for _, m := range ms {
		t.Rows = append(t.Rows, []string{m.Name, strconv.Itoa(len(m.Samples)),
			fmtDur(m.Percentile(50)), fmtDur(m.Percentile(99)), fmtDur(m.Percentile(100))})
	}
	if len(ms) == 0 {
		t.Rows = append(t.Rows, []string{"(nothing could be timed)", "0", "", "", ""})
	}
	return t
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// mockTrigger finds, through the peer credentials of a connection to the
// plugin's socket, the process that serves it, and makes a trigger only
// when that process is accel-doctor's plugin mock: SIGUSR1 flips one of
// its devices' health. No other process is ever signalled. In
// --device-plugin-dir mode the socket is known only once the plugin registers,
// so the lookup is made on the first pull.
func mockTrigger(o deviceplugin.TestOptions) (func(context.Context) error, string) {
	var (
		once sync.Once
		pid  int
		why  error
	)
	find := func() {
		sock := o.Socket
		if sock == "" {
			sock = registeredSocket(o.KubeletDir)
		}
		if sock == "" {
			why = fmt.Errorf("no socket in %s is served by accel-doctor's plugin mock, the only plugin this test makes change a device's health", o.KubeletDir)
			return
		}
		pid, why = mockPID(sock)
	}
	return func(context.Context) error {
		once.Do(find)
		if why != nil {
			return why
		}
		return unix.Kill(pid, unix.SIGUSR1)
	}, "SIGUSR1 to the accel-doctor plugin mock serving the socket (peer credentials)"
}

// registeredSocket is the first socket in dir, besides kubelet.sock,
// that accel-doctor's mock serves; "" when there is none.
func registeredSocket(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if e.Name() == deviceplugin.KubeletSocket || e.Type()&os.ModeSocket == 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := mockPID(p); err == nil {
			return p
		}
	}
	return ""
}

// mockPID is the PID of the process serving sock if it is accel-doctor's
// plugin mock (its command line says "plugin mock").
func mockPID(sock string) (int, error) {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rc, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cred.Pid))
	if err != nil {
		return 0, err
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if !containsSeq(args, "plugin", "mock") || !(sameExe(int(cred.Pid)) || strings.HasPrefix(filepath.Base(args[0]), "accel-doctor")) {
		return 0, fmt.Errorf("the process serving %s (pid %d) is not accel-doctor plugin mock: no trigger", sock, cred.Pid)
	}
	return int(cred.Pid), nil
}

func containsSeq(args []string, a, b string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == a && args[i+1] == b {
			return true
		}
	}
	return false
}

// sameExe reports whether pid runs this very executable.
func sameExe(pid int) bool {
	a, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	b, err := os.Stat("/proc/self/exe")
	return err == nil && os.SameFile(a, b)
}

// draPlugin is the DRA side of the plugin commands: accel-doctor-kube's,
// or, in accel-doctor, a note (the command lines with --dra go to
// accel-doctor-kube before these commands are built: wantsKube).
func draPlugin(g *cli.Globals) *cli.DRAPlugin {
	if ext := g.Ext(); ext != nil && ext.DRA != nil {
		return ext.DRA
	}
	return &cli.DRAPlugin{
		MockHelp: "\n\nWith --dra it is a fake DRA driver instead: accel-doctor-kube runs it (accel-doctor-kube plugin mock --help).",
		TestHelp: "\n\nWith --dra it tests a DRA driver: accel-doctor-kube runs it (accel-doctor-kube plugin test --help).",
		AddMockFlags: func(*cobra.Command) (func() bool, func(context.Context, *cli.Globals, cli.MockFlags) error) {
			return func() bool { return false }, nil
		},
		AddTestFlags: func(*cobra.Command) (func() bool, func(context.Context, *cli.Globals, cli.TestFlags) error) {
			return func() bool { return false }, nil
		},
	}
}

// What the flags both sides share do with --dra, in their help (in
// accel-doctor-kube: the binary with the DRA side).
func draError(d *cli.DRAPlugin) string {
	if len(d.Modes) == 0 {
		return ""
	}
	return `; --dra prepare-error: NodePrepareResources', default "mock: preparation refused"`
}

func draSocket(d *cli.DRAPlugin) string {
	if len(d.Modes) == 0 {
		return ""
	}
	return "; with --dra: one whose devices must not be the driver's too (double advertising)"
}

func draSamples(d *cli.DRAPlugin) string {
	if len(d.Modes) == 0 {
		return ""
	}
	return "; with --dra: claims prepared and unprepared (default 20)"
}

func draModes(d *cli.DRAPlugin) string {
	if len(d.Modes) == 0 {
		return ""
	}
	return "; with --dra: " + strings.Join(d.Modes, ", ")
}
