package dra

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/kubeletrpc/grpccall"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func read(t testing.TB, dir string, opts Options) *Node {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.RPC == nil {
		opts.RPC = grpccall.Caller{}
	}
	n, err := Read(context.Background(), hostfs.MustNew(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func registration(t testing.TB, n *Node, name string) *Registration {
	t.Helper()
	for _, r := range n.Registrations {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no registration %s in %+v", name, n.Registrations)
	return nil
}

func driverDir(t testing.TB, n *Node, name string) *DriverDir {
	t.Helper()
	for _, d := range n.DriverDirs {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no driver directory %s", name)
	return nil
}

// A healthy node: every fact present, none a fault, and the only call made
// is GetInfo.
func TestReadHealthy(t *testing.T) {
	dn := newDRANode(t)
	n := read(t, dn.dir, Options{})
	if n.RegistryState != kubelet.Present || n.PluginsState != kubelet.Present || n.StateState != kubelet.Present {
		t.Fatalf("states: registry %s plugins %s state %s (%s)", n.RegistryState, n.PluginsState, n.StateState, n.StateErr)
	}
	r := registration(t, n, driverName+"-reg.sock")
	want := &PluginInfo{Type: TypeDRA, Name: driverName, Endpoint: "/var/lib/kubelet/plugins/" + driverName + "/dra.sock",
		SupportedVersions: []string{"v1.DRAPlugin", "v1beta1.DRAPlugin"}}
	if d := cmp.Diff(want, r.Info); d != "" {
		t.Errorf("GetInfo (-want +got)\n%s", d)
	}
	if !r.Live() || r.Unsupported || r.Endpoint.Dial.Answer != Connected || r.OlderThanKubelet {
		t.Errorf("registration %+v endpoint %+v", r, r.Endpoint)
	}
	if dd := driverDir(t, n, driverName); !dd.Serving() || dd.NotRegistered() || !dd.Live {
		t.Errorf("driver dir %+v", dd)
	}
	if !n.Registered(driverName) || n.UnregisteredClaimDrivers() != nil {
		t.Errorf("registered %v, unregistered claim drivers %v", n.Registered(driverName), n.UnregisteredClaimDrivers())
	}
	if !n.State.ChecksumOK || len(n.CDI) != 1 || n.CDI[0].Resolve != Resolved || n.WrittenBeforeBoot {
		t.Errorf("state %+v cdi %+v before boot %v", n.State, n.CDI, n.WrittenBeforeBoot)
	}
	if n.CDI[0].Claim != "ml/train-gpu" || n.CDI[0].Driver != driverName || n.CDI[0].Device != "node-a/gpu-0" {
		t.Errorf("cdi device %+v", n.CDI[0])
	}
	if len(n.Double) != 0 || n.DoubleNotRun != "" {
		t.Errorf("double %+v (%s)", n.Double, n.DoubleNotRun)
	}
	if got := dn.calls.list(); !slices.Equal(got, []string{registerapi.Registration_GetInfo_FullMethodName}) {
		t.Errorf("calls %v, want GetInfo only", got)
	}
	if !slices.Equal(n.Drivers(), []string{driverName}) {
		t.Errorf("drivers %v", n.Drivers())
	}
}

// The reboot case: the per-claim spec lived in /var/run/cdi (a tmpfs) and
// is gone; the state was written before the boot.
func TestClaimCDISpecGone(t *testing.T) {
	dn := newDRANode(t)
	os.RemoveAll(filepath.Join(dn.dir, "var/run/cdi"))
	setMtime(t, filepath.Join(dn.kdir, StateName), time.Unix(bootTime-3600, 0))
	n := read(t, dn.dir, Options{})
	if len(n.CDI) != 1 || n.CDI[0].Resolve != Unresolved {
		t.Fatalf("cdi %+v", n.CDI)
	}
	if !strings.Contains(n.CDI[0].Evidence, "unresolvable CDI devices "+cdiID0) {
		t.Errorf("evidence %q", n.CDI[0].Evidence)
	}
	if !n.WrittenBeforeBoot {
		t.Errorf("state mtime %v, boot %v: not seen as before the boot", n.StateModTime, n.BootTime)
	}
}

// The claim's spec is there but the CDI library refuses it (a device with
// empty containerEdits, as `plugin mock --dra --mode empty-edits`
// writes): unresolved, and the rejected file is named with the library's
// error rather than said to be missing.
func TestClaimCDISpecRejected(t *testing.T) {
	dn := newDRANode(t)
	p := filepath.Join(dn.dir, "var/run/cdi/k8s.gpu.example.com-claim_"+claimUID+".json")
	write(t, p, `{"cdiVersion":"0.6.0","kind":"k8s.gpu.example.com/claim","devices":[{"name":"`+claimUID+`-gpu-0","containerEdits":{}}]}`)
	n := read(t, dn.dir, Options{})
	if len(n.CDI) != 1 || n.CDI[0].Resolve != Unresolved {
		t.Fatalf("cdi %+v", n.CDI)
	}
	if r := n.CDI[0].Rejected; !strings.HasPrefix(r, "/var/run/cdi/k8s.gpu.example.com-claim_"+claimUID+".json: ") || !strings.Contains(r, "empty device edits") {
		t.Errorf("rejected %q: want the spec's path and the library's \"empty device edits\"", r)
	}
	// A missing spec names no rejected one.
	os.Remove(p)
	if n := read(t, dn.dir, Options{}); len(n.CDI) != 1 || n.CDI[0].Rejected != "" {
		t.Errorf("spec gone: cdi %+v", n.CDI)
	}
}

// A spec directory that cannot be looked at: whether the ID resolves is
// unknown, never unresolved.
func TestClaimCDIDirNotCaptured(t *testing.T) {
	dn := newDRANode(t)
	live := hostfs.MustNew(dn.dir)
	rec := live.Record()
	// Another reader read the state; the CDI directories were never read.
	if _, err := live.ReadFile("/var/lib/kubelet/" + StateName); err != nil {
		t.Fatal(err)
	}
	live.ReadFile("/proc/stat")
	var buf bytes.Buffer
	if _, err := live.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	n, err := Read(context.Background(), snap, Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.CDI) != 1 || n.CDI[0].Resolve != ResolveUnknown || n.CDI[0].UnsureWhy == "" {
		t.Errorf("cdi %+v", n.CDI)
	}
	if n.RegistryState != kubelet.NotCaptured || n.PluginsState != kubelet.NotCaptured {
		t.Errorf("registry %s plugins %s: want not-captured", n.RegistryState, n.PluginsState)
	}
	if n.UnregisteredClaimDrivers() != nil {
		t.Errorf("claim drivers judged unregistered from a capture that did not look: %v", n.UnregisteredClaimDrivers())
	}
}

// A stale registration: the driver's registration socket is left behind
// (ECONNREFUSED) while its service socket serves: not registered.
func TestStaleRegistration(t *testing.T) {
	dn := newDRANode(t)
	p := filepath.Join(dn.kdir, "plugins_registry", driverName+"-reg.sock")
	os.Remove(p)
	deadSocket(t, p)
	n := read(t, dn.dir, Options{})
	r := registration(t, n, driverName+"-reg.sock")
	if r.Dial.Answer != kubelet.Refused || r.Live() {
		t.Errorf("registration %+v", r.Dial)
	}
	dd := driverDir(t, n, driverName)
	if !dd.NotRegistered() || !slices.Equal(dd.RegisteredBy, []string{"/var/lib/kubelet/plugins_registry/" + driverName + "-reg.sock"}) {
		t.Errorf("driver dir %+v", dd)
	}
	if !slices.Equal(n.UnregisteredClaimDrivers(), []string{driverName}) {
		t.Errorf("claim drivers %v", n.UnregisteredClaimDrivers())
	}
}

// No registration at all for a serving driver directory; a leftover
// directory without a serving socket is no driver.
func TestDriverDirWithoutRegistration(t *testing.T) {
	dn := newDRANode(t)
	os.Mkdir(filepath.Join(dn.kdir, "plugins", "npu.example.org"), 0o755)
	listen(t, filepath.Join(dn.kdir, "plugins", "npu.example.org", "dra.sock"))
	os.MkdirAll(filepath.Join(dn.kdir, "plugins", "old.example.org"), 0o755)
	deadSocket(t, filepath.Join(dn.kdir, "plugins", "old.example.org", "dra.sock"))
	n := read(t, dn.dir, Options{})
	if dd := driverDir(t, n, "npu.example.org"); !dd.NotRegistered() || len(dd.RegisteredBy) != 0 {
		t.Errorf("npu %+v", dd)
	}
	if dd := driverDir(t, n, "old.example.org"); dd.NotRegistered() || dd.Sockets[0].Dial.Answer != kubelet.Refused {
		t.Errorf("leftover %+v", dd)
	}
	if dd := driverDir(t, n, driverName); dd.NotRegistered() {
		t.Errorf("healthy driver %+v", dd)
	}
}

// Registration sockets that do not answer GetInfo: garbage, silence
// (bounded by the timeout: a second, so that the healthy registration answers on a loaded machine), a regular file; and answers the kubelet
// rejects: unsupported versions, an endpoint that is missing.
func TestRegistrationFaults(t *testing.T) {
	dn := newDRANode(t)
	reg := filepath.Join(dn.kdir, "plugins_registry")
	garbage(t, filepath.Join(reg, "garbage-reg.sock"))
	listen(t, filepath.Join(reg, "silent-reg.sock"))
	write(t, filepath.Join(reg, "file-reg.sock"), "not a socket")
	dn.register(t, "old.example.org-reg.sock", &registerapi.PluginInfo{Type: TypeDRA, Name: "old.example.org",
		Endpoint: "/var/lib/kubelet/plugins/old.example.org/dra.sock", SupportedVersions: []string{"1.0.0", "v1alpha4.Node"}})
	dn.register(t, "gone.example.org-reg.sock", &registerapi.PluginInfo{Type: TypeDRA, Name: "gone.example.org",
		Endpoint: "/var/lib/kubelet/plugins/gone.example.org/dra.sock", SupportedVersions: []string{"v1.DRAPlugin"}})
	dn.register(t, "rel.example.org-reg.sock", &registerapi.PluginInfo{Type: TypeDRA, Name: "rel.example.org",
		Endpoint: "plugins/rel.example.org/dra.sock", SupportedVersions: []string{"v1.DRAPlugin"}})
	dn.register(t, "csi.example.org-reg.sock", &registerapi.PluginInfo{Type: TypeCSI, Name: "csi.example.org",
		Endpoint: "/var/lib/kubelet/plugins/" + driverName + "/dra.sock", SupportedVersions: []string{"1.0.0"}})
	start := time.Now()
	n := read(t, dn.dir, Options{Timeout: time.Second})
	if el := time.Since(start); el > 5*time.Second {
		// Not a timing assertion: a Read that hangs past any timeout.
		t.Fatalf("Read took %v with a 1s timeout", el)
	}
	for name, want := range map[string]kubelet.Answer{
		"garbage-reg.sock": kubelet.Failed, "silent-reg.sock": kubelet.TimedOut, "file-reg.sock": kubelet.NotSocket,
	} {
		if r := registration(t, n, name); r.Dial.Answer != want || r.Live() {
			t.Errorf("%s: %+v, want %s", name, r.Dial, want)
		}
	}
	if r := registration(t, n, "old.example.org-reg.sock"); !r.Unsupported {
		t.Errorf("old versions not unsupported: %+v", r.Info)
	}
	if r := registration(t, n, "gone.example.org-reg.sock"); r.Unsupported || r.Live() || r.Endpoint.Dial.Answer != kubelet.Gone {
		t.Errorf("missing endpoint: %+v", r.Endpoint)
	}
	if r := registration(t, n, "rel.example.org-reg.sock"); r.Live() || r.Endpoint.Absolute {
		t.Errorf("relative endpoint: %+v", r.Endpoint)
	}
	if r := registration(t, n, "csi.example.org-reg.sock"); !r.Live() || r.Unsupported {
		t.Errorf("CSI registration: %+v", r)
	}
	if r := registration(t, n, driverName+"-reg.sock"); !r.Live() {
		t.Errorf("the healthy registration: %+v", r.Dial)
	}
	if slices.Contains(dn.calls.list(), registerapi.Registration_NotifyRegistrationStatus_FullMethodName) {
		t.Errorf("NotifyRegistrationStatus called")
	}
}

// A registration older than the kubelet is evidence, not a fault: the
// plugin watcher re-registers the sockets it finds when it starts.
func TestRegistrationOlderThanKubelet(t *testing.T) {
	dn := newDRANode(t)
	setMtime(t, filepath.Join(dn.kdir, "plugins_registry", driverName+"-reg.sock"), dn.start.Add(-time.Minute))
	n := read(t, dn.dir, Options{})
	r := registration(t, n, driverName+"-reg.sock")
	if !r.OlderThanKubelet || !r.Live() || driverDir(t, n, driverName).NotRegistered() {
		t.Errorf("registration %+v", r)
	}
	if n.KubeletStartFrom != "/var/lib/kubelet/device-plugins/kubelet.sock" || !n.KubeletStart.Equal(dn.start) {
		t.Errorf("kubelet start %v from %q", n.KubeletStart, n.KubeletStartFrom)
	}
}

// The state: corrupt, not JSON, unreadable, absent.
func TestStateFaults(t *testing.T) {
	dn := newDRANode(t)
	p := filepath.Join(dn.kdir, StateName)
	good, _ := os.ReadFile(p)
	bad := bytes.Replace(good, []byte("train-gpu"), []byte("train-gpX"), 1)
	write(t, p, string(bad))
	n := read(t, dn.dir, Options{})
	if n.State == nil || n.State.ChecksumOK || n.State.Stored == n.State.Computed {
		t.Errorf("corrupt state verified: %+v", n.State)
	}
	write(t, p, "{not json")
	if n = read(t, dn.dir, Options{}); n.StateState != kubelet.Unreadable || n.State != nil || !n.StateMalformed || !strings.Contains(n.StateErr, StateName) {
		t.Errorf("garbage state: %s %q malformed %v", n.StateState, n.StateErr, n.StateMalformed)
	}
	os.Remove(p)
	os.Mkdir(p, 0o755)
	if n = read(t, dn.dir, Options{}); n.StateState != kubelet.Unreadable || n.StateMalformed || len(n.CDI) != 0 {
		t.Errorf("directory as state: %s %q malformed %v", n.StateState, n.StateErr, n.StateMalformed)
	}
	os.Remove(p)
	if n = read(t, dn.dir, Options{}); n.StateState != kubelet.Absent || n.State != nil {
		t.Errorf("no state: %s", n.StateState)
	}
}

// A host that is not a DRA node: nothing there, nothing wrong.
func TestReadNothing(t *testing.T) {
	dir := shortTemp(t)
	os.MkdirAll(filepath.Join(dir, "var/lib/kubelet"), 0o755)
	n := read(t, dir, Options{})
	if n.RegistryState != kubelet.Absent || n.PluginsState != kubelet.Absent || n.StateState != kubelet.Absent {
		t.Errorf("states %s %s %s", n.RegistryState, n.PluginsState, n.StateState)
	}
	if len(n.Registrations)+len(n.DriverDirs)+len(n.CDI)+len(n.Double) != 0 || n.DoubleNotRun != "" {
		t.Errorf("facts on an empty host: %+v", n)
	}
	if _, err := Read(context.Background(), hostfs.MustNew(dir), Options{RPC: grpccall.Caller{}, KubeletDir: "var/lib/kubelet"}); err == nil {
		t.Errorf("a relative kubelet dir was accepted")
	}
}

// A snapshot replays what the sockets answered, and reads the state and
// the specs from its files.
func TestSnapshotReplays(t *testing.T) {
	dn := newDRANode(t)
	live := hostfs.MustNew(dn.dir)
	rec := live.Record()
	want, err := Read(context.Background(), live, Options{RPC: grpccall.Caller{}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := live.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	got, err := Read(context.Background(), snap, Options{RPC: grpccall.Caller{}})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Replayed {
		t.Errorf("not replayed")
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
		cmpopts.IgnoreFields(Node{}, "Replayed", "StateModTime", "WrittenBeforeBoot")); d != "" {
		t.Errorf("replay differs (-live +replay)\n%s", d)
	}
	if !slices.Equal(dn.calls.list(), []string{registerapi.Registration_GetInfo_FullMethodName}) {
		t.Errorf("calls %v: the replay dialed", dn.calls.list())
	}
}

func TestReplayRejectsBadCaptures(t *testing.T) {
	for _, b := range []string{`{`, `{"format":2}`, `{"format":1,"registrations":[null]}`, `{"format":1,"driver_dirs":[null]}`} {
		if err := (&Node{}).replay([]byte(b)); err == nil {
			t.Errorf("%s: accepted", b)
		}
	}
}

// A registration directory that cannot be listed: unreadable, and no
// driver is judged unregistered from it.
func TestRegistryUnreadable(t *testing.T) {
	dn := newDRANode(t)
	reg := filepath.Join(dn.kdir, "plugins_registry")
	os.RemoveAll(reg)
	write(t, reg, "a file where the directory should be")
	n := read(t, dn.dir, Options{})
	if n.RegistryState != kubelet.Unreadable || n.RegistryErr == "" || len(n.Registrations) != 0 {
		t.Errorf("registry %s %q", n.RegistryState, n.RegistryErr)
	}
	if n.UnregisteredClaimDrivers() != nil {
		t.Errorf("claim drivers judged unregistered: %v", n.UnregisteredClaimDrivers())
	}
	// The driver directory still serves; whether it is registered is
	// not known: never "not registered".
	if dd := driverDir(t, n, driverName); !dd.Serving() || dd.NotRegistered() || !dd.RegistryUnknown {
		t.Errorf("driver dir %+v", dd)
	}
}

// A registration socket that could not be tried may be any driver's live
// registration: no claim's driver is then "not registered", and no driver
// directory is judged against the registrations.
func TestRegistrationsUnknownWhenOneCouldNotBeTried(t *testing.T) {
	n := &Node{RegistryState: kubelet.Present, State: &State{}}
	if !n.registrationsKnown() {
		t.Fatal("an empty, read registry: known")
	}
	for _, a := range []kubelet.Answer{kubelet.NoAccess, kubelet.Gone} {
		n.Registrations = []*Registration{{Name: "x-reg.sock", Dial: kubelet.Dial{Answer: a}}}
		if n.registrationsKnown() || n.UnregisteredClaimDrivers() != nil {
			t.Errorf("a registration that answered %s: registrations known", a)
		}
	}
	n.Registrations = []*Registration{{Name: "x-reg.sock", Dial: kubelet.Dial{Answer: kubelet.Refused}}}
	if !n.registrationsKnown() {
		t.Error("a refused registration is dead, and known")
	}
}

// The boot time of real hosts' /proc/stat, a 130 KiB one (its intr line)
// among them.
func TestParseBtimeRealStat(t *testing.T) {
	dir := testutil.CorpusDir(t)
	want := map[string]int64{"hwloc/linux/2pa-pcidomain32bits.tar.bz2": 1533039413, "hwloc/linux/nvidiagpunumanodes.tar.bz2": 1523625559}
	for a, w := range want {
		seeds := testutil.CorpusSeeds(t, a, func(p string) bool { return strings.HasSuffix(p, "/proc/stat") })
		if len(seeds) != 1 {
			t.Fatalf("%s: %d /proc/stat", a, len(seeds))
		}
		if bt, ok := parseBtime(seeds[0]); !ok || bt.Unix() != w {
			t.Errorf("%s: %v %v, want %d", a, bt, ok, w)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "procfs", "fixtures.ttar"))
	if err != nil {
		t.Fatal(err)
	}
	// The ttar holds it as "Path: fixtures/proc/stat", "Lines: 16", then
	// the lines.
	_, rest, ok := strings.Cut(string(b), "Path: fixtures/proc/stat\nLines: 16\n")
	lines := strings.SplitAfterN(rest, "\n", 17)
	if !ok || len(lines) < 17 {
		t.Fatal("no fixtures/proc/stat in procfs/fixtures.ttar")
	}
	stat := strings.Join(lines[:16], "")
	if bt, ok := parseBtime([]byte(stat)); len(stat) < 100<<10 || !ok || bt.Unix() != 1418183276 {
		t.Errorf("procfs' /proc/stat (%d bytes): %v %v", len(stat), bt, ok)
	}
}

// FuzzParseBtime asserts of the /proc/stat boot time reader:
//   - a boot time it gives is whole seconds after the epoch, the value of
//     the first "btime" line (show_stat writes "btime %llu");
//   - "btime N", as the kernel writes it among the other lines, parses
//     back to N (round trip);
//   - a stat without a btime line, or whose first one holds no positive
//     number, gives none, never a panic.
func FuzzParseBtime(f *testing.F) {
	f.Add([]byte("cpu  1 2 3 4 5 6 7 0 0 0\nbtime 1600000000\nprocesses 42\n"))
	f.Add([]byte("btime 0\n"))
	f.Add([]byte("btime -1\nbtime 5\n"))
	f.Add([]byte("btime 9223372036854775808\n"))
	f.Add([]byte("btime\t 17 \n"))
	paths, _ := filepath.Glob(filepath.Join("testdata", "nodes", "*", "proc", "stat"))
	for _, p := range paths[:min(2, len(paths))] {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Real hosts' /proc/stat (procfs' fixture, whose intr line alone is
	// 130 KiB, is over the size of a seed; TestParseBtimeRealStat reads it).
	for _, a := range []string{"hwloc/linux/2pa-pcidomain32bits.tar.bz2"} {
		for _, b := range testutil.CorpusSeeds(f, a, func(p string) bool { return strings.HasSuffix(p, "/proc/stat") }) {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		bt, ok := parseBtime(b)
		var first string
		found := false
		for _, l := range strings.Split(string(b), "\n") {
			if fs := strings.Fields(l); len(fs) == 2 && fs[0] == "btime" {
				first, found = fs[1], true
				break
			}
		}
		want, err := strconv.ParseInt(first, 10, 64)
		if !ok {
			if !bt.IsZero() || found && err == nil && want > 0 {
				t.Fatalf("%q: no boot time (%v), but its btime line says %q", b, bt, first)
			}
			return
		}
		if bt.Unix() <= 0 || bt.Nanosecond() != 0 || !found || err != nil || bt.Unix() != want {
			t.Fatalf("%q: boot time %v (%d), but its first btime line says %q", b, bt, bt.Unix(), first)
		}
		line := fmt.Sprintf("cpu  1 2 3 4 5 6 7 0 0 0\nintr 0\nctxt 1\nbtime %d\nprocesses 2\n", bt.Unix())
		if back, ok := parseBtime([]byte(line)); !ok || !back.Equal(bt) {
			t.Fatalf("boot time %d parsed back as %v, %v", bt.Unix(), back, ok)
		}
	})
}
