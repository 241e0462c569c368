package apiserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/kubernetes/test/utils/ktesting/initoption"
)

// Cluster is a running etcd, kube-apiserver and kube-scheduler.
type Cluster struct {
	// Config reaches the API server as its loopback client does
	// (system:apiserver, every permission), with QPS and burst raised for
	// tests that create many objects.
	Config *rest.Config
	// Client is a clientset over Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for Config, for binaries
	// the tests run (accel-doctor cluster --kubeconfig).
	Kubeconfig string
	// Dir holds the kubeconfig and the components' logs (LogFile).
	Dir string
	// LogFile receives klog's output of all three components.
	LogFile string
}

// Start starts etcd, the API server and the scheduler for t; all three stop
// when t ends. It fails t if any of them does not come up.
func Start(t testing.TB) *Cluster {
	t.Helper()
	return StartWithFlags(t)
}

// StartWithFlags is Start with more kube-apiserver flags, e.g.
// --authorization-mode=Node,RBAC for a test of RBAC (the test server's
// default authorizes every request).
func StartWithFlags(t testing.TB, flags ...string) *Cluster {
	t.Helper()
	start := time.Now()
	dir := t.TempDir()
	c := &Cluster{Dir: dir, LogFile: filepath.Join(dir, "components.log")}
	logToFile(t, c.LogFile)

	etcdURL := startEtcd(t, filepath.Join(dir, "etcd"))

	// The storage prefix is unique per start, as the integration
	// framework's SharedEtcd makes it, although each Start has an etcd of
	// its own.
	storage := storagebackend.NewDefaultConfig("/registry-"+strconv.FormatInt(time.Now().UnixNano(), 36), nil)
	storage.Transport.ServerList = []string{etcdURL}

	// The components' contextual logs go to klog's global logger, and so
	// to LogFile, not to t.Log: the API server's start alone is dozens of
	// lines in every passing test's output.
	tCtx := ktesting.Init(t, initoption.PerTestOutput(false))
	opts := apiservertesting.NewDefaultTestServerOptions()
	// The invariant check scrapes /metrics at teardown and fails the test
	// on metrics the e2e tests do not own; it checks the API server, not
	// what runs against it.
	opts.DisableInvariantChecks = true
	srv, err := apiservertesting.StartTestServer(tCtx, opts, append([]string{
		// Only loopback: the test server listens on 127.0.0.1; the
		// advertise address keeps the kubernetes Service's endpoint
		// there too.
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
	}, flags...), storage)
	if err != nil {
		t.Fatalf("start kube-apiserver: %v (its log: %s)", err, c.LogFile)
	}
	t.Cleanup(srv.TearDownFn)

	c.Config = rest.CopyConfig(srv.ClientConfig)
	c.Client, err = kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(c.Kubeconfig, c.Config); err != nil {
		t.Fatal(err)
	}

	startScheduler(t, tCtx, c.Kubeconfig)
	t.Logf("etcd, kube-apiserver (%s) and kube-scheduler up in %v; logs in %s", c.Config.Host, time.Since(start).Round(time.Millisecond), c.LogFile)
	return c
}

// startEtcd runs an embedded single-member etcd with its client and peer
// URLs on 127.0.0.1, and returns the client URL.
func startEtcd(t testing.TB, dataDir string) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "e2e"
	cfg.Dir = dataDir
	// A single member that is never restarted from its data: fsync buys
	// nothing (the integration tests' embedded etcd does the same).
	cfg.UnsafeNoFsync = true
	// etcd's embed takes URLs, not listeners: a port found free may be
	// taken by another process before etcd binds it. A start that fails
	// with EADDRINUSE is tried again on new ports.
	var (
		e      *embed.Etcd
		err    error
		client url.URL
	)
	for attempt := 1; ; attempt++ {
		ports := freePorts(t, 2)
		client = url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		// etcd logs through zap; errors only, to the components' log.
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
			zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
			zapcore.AddSync(klogWriter{}), zapcore.ErrorLevel)))
		e, err = embed.StartEtcd(cfg)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 3 {
			t.Fatalf("start etcd (attempt %d): %v", attempt, err)
		}
		t.Logf("start etcd on %s: %v; again on other ports", client.Host, err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(time.Minute):
		e.Server.Stop()
		t.Fatal("etcd was not ready after a minute")
	}
	return client.String()
}

// freePorts returns n ports free on 127.0.0.1 now; another process may
// take one before etcd binds it (startEtcd tries again).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// startScheduler runs kube-scheduler's own command code (Setup and Run, as
// `kube-scheduler --kubeconfig F` does) with leader election off and no
// serving port: it only watches the API server and binds pods.
func startScheduler(t testing.TB, tCtx context.Context, kubeconfig string) {
	t.Helper()
	opts := scheduleroptions.NewOptions()
	fs := pflag.NewFlagSet("kube-scheduler", pflag.ContinueOnError)
	for _, f := range opts.Flags.FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("kube-scheduler %v: %v", args, err)
	}
	ctx, cancel := context.WithCancel(tCtx)
	cc, sched, err := schedulerapp.Setup(ctx, opts)
	if err != nil {
		cancel()
		t.Fatalf("kube-scheduler setup: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- schedulerapp.Run(ctx, cc, sched) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("kube-scheduler did not stop within 30s")
		}
		// Run registers its configuration in configz, a process-wide
		// registry that refuses a second one; the next Start's
		// scheduler needs it gone (as the scheduler's own test server
		// does in its teardown).
		configz.Delete("componentconfig")
	})
	// Run returns only on error or cancellation; give it a moment to
	// fail on its own (a bad kubeconfig) before the tests rely on it.
	select {
	case err := <-done:
		configz.Delete("componentconfig")
		t.Fatalf("kube-scheduler stopped: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
}

// writeKubeconfig writes cfg (host, CA data, server name, bearer token) as a
// kubeconfig file with one context, "e2e".
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
	}
	kc.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.TLSClientConfig.CertData,
		ClientKeyData:         cfg.TLSClientConfig.KeyData,
	}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e", Namespace: "default"}
	kc.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*kc, path)
}

// EnsureNamespace creates namespace ns (unless it exists) and its default
// ServiceAccount, which the ServiceAccount admission plugin requires of
// every Pod and which only the controller-manager would otherwise create.
func (c *Cluster) EnsureNamespace(ctx context.Context, ns string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	_, err = c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount %s/default: %w", ns, err)
	}
	return nil
}

// NotReadyTaint is the taint the API server's TaintNodesByCondition
// admission plugin puts on every new Node
// (plugin/pkg/admission/nodetaint); the node lifecycle controller removes it
// once the kubelet reports Ready. CreateNode removes it in its place.
const NotReadyTaint = "node.kubernetes.io/not-ready"

// CreateNode creates node (its spec and metadata) and then sets its status
// as a kubelet would: the given status, plus a Ready condition when it has
// none. The not-ready taint the API server added is removed, as the node
// lifecycle controller would once the node is Ready; other taints of
// node.Spec are kept. It returns the node as stored.
func (c *Cluster) CreateNode(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	status := node.Status
	n, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create node %s: %w", node.Name, err)
	}
	var kept []corev1.Taint
	for _, taint := range n.Spec.Taints {
		if taint.Key != NotReadyTaint {
			kept = append(kept, taint)
		}
	}
	if len(kept) != len(n.Spec.Taints) {
		n.Spec.Taints = kept
		if n, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("remove taint %s of node %s: %w", NotReadyTaint, node.Name, err)
		}
	}
	n.Status = status
	hasReady := false
	for _, cond := range n.Status.Conditions {
		hasReady = hasReady || cond.Type == corev1.NodeReady
	}
	if !hasReady {
		now := metav1.Now()
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "set by the e2e harness", LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	if n, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("set status of node %s: %w", node.Name, err)
	}
	return n, nil
}

// WaitFor polls cond every 50ms until it returns true or an error, or
// timeout passes; it says how long it took.
func WaitFor(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) (time.Duration, error) {
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, cond)
	return time.Since(start), err
}

// klogWriter sends etcd's zap output through klog, so that all three
// components' logs land in the one file.
type klogWriter struct{}

func (klogWriter) Write(p []byte) (int, error) {
	klog.ErrorDepth(1, string(p))
	return len(p), nil
}

// logToFile sends klog's global output (the components log through it as
// well as through their contexts) to path, not to the test binary's
// stderr, where the API server's start-up alone is thousands of lines. If
// t fails, the log's last lines are added to its output.
func logToFile(t testing.TB, path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// klog's flags are its only way to stop copying errors to stderr
	// (stderrthreshold); a private flag set leaves the test binary's own
	// flags alone.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, val := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, val); err != nil {
			t.Fatal(err)
		}
	}
	// klog writes a line to the output of its severity and of every
	// lower one: only INFO's output gets it, once.
	setKlogOutput(f)
	t.Cleanup(func() {
		klog.Flush()
		if t.Failed() {
			if b, err := os.ReadFile(path); err == nil {
				const keep = 16 << 10
				if len(b) > keep {
					b = b[len(b)-keep:]
				}
				t.Logf("last lines of %s:\n%s", path, b)
			}
		}
		// Goroutines of the stopped components may still log on their
		// way out (etcd's listeners: "use of closed network
		// connection"); that is after the test and of no use to it.
		setKlogOutput(io.Discard)
		f.Close()
	})
}

func setKlogOutput(w io.Writer) {
	klog.SetOutputBySeverity("INFO", w)
	for _, sev := range []string{"WARNING", "ERROR", "FATAL"} {
		klog.SetOutputBySeverity(sev, io.Discard)
	}
}

// PeakRSS is the test process's peak resident set size (VmHWM of
// /proc/self/status), in bytes: what the control plane and the tests
// together have held.
func PeakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}
