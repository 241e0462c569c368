package kubecli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"github.com/spf13/cobra"

	"github.com/accel-doctor/accel-doctor/internal/agent"
	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/cluster"
	"github.com/accel-doctor/accel-doctor/internal/diagnose"
)

func newAgentCmd(g *cli.Globals) *cobra.Command {
	var (
		opts        cluster.ConfigOptions
		node        string
		interval    time.Duration
		heartbeat   time.Duration
		listen      string
		kubeletDir  string
		metricsOnly bool
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "DaemonSet mode: check every interval; publish a node condition, an Event per transition, the summary annotation, metrics (WRITES its node's status and annotations)",
		Long: `agent is accel-doctor as a DaemonSet: it runs check over --root (the
host's filesystem mounted read-only, /host) every --interval and publishes
the verdict:

  - the node condition AcceleratorsReady: True (PASS, or WARN with its code as
    the reason), False with the first failing code as the reason, Unknown
    when nothing could be judged (node-problem-detector's custom-plugin
    convention: OK 0, NonOK 1, Unknown 2);
  - an Event about the node (namespace default) on each change of the
    condition's status or reason;
  - the annotation accel-doctor.io/summary that 'accel-doctor cluster' reads;
    the condition and the annotation are written when they change and at
    least every --heartbeat (their interval_s), so that 'cluster' can tell a
    summary whose agent stopped (older than 3 heartbeats);
  - Prometheus metrics on --metrics-address (default 127.0.0.1:9808, this
    host or pod only; the DaemonSet gives [$(POD_IP)]:9808, its pod's own
    address): /metrics (accel_doctor_check_findings by
    node, layer, code, status and device, with DCGM exporter's pci_bus_id,
    gpu, UUID, modelName labels and kube-state-metrics' resource; the run's
    duration and time) and /healthz (200 while the last check finished
    within 3 intervals).

WHAT IT WRITES: its own node's status (the AcceleratorsReady condition, a
strategic-merge patch of nodes/status) and its own node's annotations (a
merge patch of accel-doctor.io/summary), and Events about its node. Nothing
else; it reads its own node (get). The RBAC it needs: get, patch on nodes;
patch on nodes/status; create on events in namespace default.

It reaches the API server as kubectl does (--kubeconfig, $KUBECONFIG,
~/.kube/config), else with the pod's service account. An API error never
ends it: it backs off (1s doubling to 2m, with jitter) and keeps checking
and serving metrics. SIGTERM or SIGINT is a normal stop (the kubelet
stopping its pod): it lets the publication under way finish (5s at most),
starts no other, stops serving and exits 0; a second signal ends it at once
(128+N). It exits 2 at start on a usage error (a root that cannot be
examined, no node name, an address it cannot listen on).

Its cgroup layer judges the device policy of its own process, as check
does without --pid: in a DaemonSet, the agent's container.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node == "" {
				return cli.UsageErr("--node-name is empty: give the node's name (in a DaemonSet: the downward API's spec.nodeName as $NODE_NAME)")
			}
			if interval < time.Second {
				return cli.UsageErr("--interval %v: at least 1s", interval)
			}
			check, err := cli.CheckRunner(g.RootDir(), diagnose.Options{KubeletDir: kubeletDir, KubeletRPC: grpccall.Caller{}}, "agent")
			if err != nil {
				return err
			}
			cfg := agent.Config{Node: node, Interval: interval, Heartbeat: heartbeat, Check: check, Log: g.Stderr()}
			if !metricsOnly {
				rc, _, err := cluster.RESTConfig(opts)
				if err != nil {
					return cli.UsageErr("%v", err)
				}
				rc.UserAgent = "accel-doctor-agent"
				if cfg.API, err = agent.NewClient(rc, node); err != nil {
					return cli.UsageErr("%v", err)
				}
			}
			addr, err := metricsAddress(listen)
			if err != nil {
				return cli.UsageErr("--metrics-address %s: %v", listen, err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return cli.UsageErr("--metrics-address %s: %v", listen, err)
			}
			// A signal ends a run with 128+N (cli.Run); a DaemonSet pod
			// gets SIGTERM at every rollout and node drain, which is no
			// failure. So the agent takes the signal as its normal stop
			// (cli.TakeStop) and stops in order: agent.Run lets the
			// publication under way finish (bounded by Config.StopGrace),
			// then the server stops, and it exits 0.
			cli.TakeStop()
			fmt.Fprintf(g.Stderr(), "agent: node %s, every %v, metrics on http://%s/metrics\n", node, interval, ln.Addr())
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			a := agent.New(cfg)
			serveErr := make(chan error, 1)
			go func() { serveErr <- a.Serve(ctx, ln) }()
			done := make(chan struct{})
			go func() { a.Run(ctx); close(done) }()
			// A daemon on every node: give back the image pages that
			// start-up faulted in (cli.TrimImageLater).
			cli.TrimImageLater()
			served := false
			select {
			case <-ctx.Done():
				fmt.Fprintln(g.Stderr(), "agent: stopping")
			case err = <-serveErr:
				served = true
			}
			cancel()
			<-done
			if !served {
				// Serve returns once the scrapes in flight are answered
				// (2s at most).
				err = <-serveErr
			}
			if err != nil {
				return cli.ExitErr(2, fmt.Errorf("serve metrics: %w", err))
			}
			fmt.Fprintln(g.Stderr(), "agent: stopped")
			return nil
		},
	}
	f := cmd.Flags()
	cli.Flag(f, "kubeconfig", cli.KubeconfigDefault).String(&opts.Kubeconfig, "")
	cli.Flag(f, "context", "").String(&opts.Context, "")
	g.AddRootFlag(cmd)
	cli.Flag(f, "node-name", " (this node's; default $NODE_NAME)").String(&node, os.Getenv("NODE_NAME"))
	cli.Flag(f, "interval", " of check's runs").Duration(&interval, 60*time.Second)
	f.DurationVar(&heartbeat, "heartbeat", 5*time.Minute, "write the node's condition and summary at least this often when they do not change (at least --interval)")
	cli.Flag(f, "metrics-address", " and /healthz: HOST:PORT, or [IP]:PORT for an IPv4 or IPv6 address (in a pod: [$(POD_IP)]:9808); by default loopback only").String(&listen, defaultMetricsAddress)
	cli.Alias(f, "listen", "", "metrics-address", "")
	cli.Flag(f, "kubelet-root-dir", "").String(&kubeletDir, "")
	f.BoolVar(&metricsOnly, "metrics-only", false, "serve metrics only; write nothing to the API server")
	return cmd
}

// defaultMetricsAddress is loopback: /metrics and /healthz tell the
// node's devices, drivers and faults, and a process started by hand
// should not serve that to its network. A pod says where it serves
// (deploy/base: its own pod IP).
const defaultMetricsAddress = "127.0.0.1:9808"

// metricsAddress is the address --metrics-address names, as net.Listen
// takes it. HOST:PORT is taken as it is; in [IP]:PORT the brackets may
// hold an IPv4 address too, so that one argument, [$(POD_IP)]:PORT,
// serves a pod of either family: the downward API's status.podIP is a
// bare address, and an IPv6 one needs the brackets (net.JoinHostPort).
// Empty brackets are refused rather than taken for every interface (a
// pod IP that was empty), and so is anything else in brackets that is
// not an IP address (a $(POD_IP) left unexpanded: the kubelet leaves a
// reference to a variable it does not define as it is).
func metricsAddress(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(s, "[") {
		if host == "" {
			return "", errors.New("nothing between the brackets (an empty pod IP?): give [IP]:PORT")
		}
		if _, err := netip.ParseAddr(host); err != nil {
			return "", fmt.Errorf("%q between the brackets is not an IP address: give [IP]:PORT", host)
		}
	}
	return net.JoinHostPort(host, port), nil
}
