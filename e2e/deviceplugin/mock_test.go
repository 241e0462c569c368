package deviceplugin

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

// `accel-doctor plugin mock` (a process) in every mode, against the
// kubelet's device manager: the symptom each mode's documentation states
// (`plugin mock --help`, generated from the same text as
// docs/device-plugin.md) is what the manager shows: GetCapacity's
// capacity and allocatable, and the admission's reason and message, in
// the manager's own words, which the documentation must quote. Then
// `accel-doctor check --layer kube` on the node names the cause.

const mockResource = "fake.example.com/gpu"

// mockDocs is each mode's documented symptom, from `plugin mock --help`
// ("  MODE\n      DOES\n      Symptom: SYMPTOM\n" per mode), and the modes
// in the order the help lists them.
func mockDocs(t *testing.T) (map[string]string, []string) {
	t.Helper()
	out, err := exec.Command(harness.AccelDoctor(t), "plugin", "mock", "--help").Output()
	if err != nil {
		t.Fatalf("plugin mock --help: %v", err)
	}
	docs := map[string]string{}
	var modes []string
	lines := strings.Split(string(out), "\n")
	mode := regexp.MustCompile(`^  ([a-z-]+)$`)
	for i := 0; i+2 < len(lines); i++ {
		m := mode.FindStringSubmatch(lines[i])
		if m == nil || !strings.HasPrefix(lines[i+2], "      Symptom: ") {
			continue
		}
		docs[m[1]] = strings.TrimPrefix(lines[i+2], "      Symptom: ")
		modes = append(modes, m[1])
	}
	if len(modes) == 0 {
		t.Fatalf("no modes in plugin mock --help:\n%s", out)
	}
	return docs, modes
}

// docQuotes fails unless the mode's documented symptom contains the
// manager's text, with the resource written RESOURCE (as the doc writes
// it) and the mode's argument as the doc names it.
func docQuotes(t *testing.T, symptom, managerText string, repl ...string) {
	t.Helper()
	q := strings.NewReplacer(append([]string{mockResource, "RESOURCE"}, repl...)...).Replace(managerText)
	if !strings.Contains(symptom, q) {
		t.Errorf("the mode's documented symptom does not quote the manager's text\n  manager: %q\n  doc:     %q", q, symptom)
	}
}

// startMock starts a kubelet and `plugin mock --mode MODE` with 2 devices.
// want is the exit status the mock must end with (0 after SIGTERM; 3
// after crash-allocate).
func startMock(t *testing.T, mode string, want int) (*harness.Kubelet, *harness.Proc) {
	t.Helper()
	k := harness.Start(t, harness.Options{})
	p := harness.StartAccelDoctor(t, "plugin", "mock", "--device-plugin-dir", k.Dir, "--resource", mockResource, "--devices", "2", "--mode", mode)
	t.Cleanup(func() {
		if code := p.Stop(); code != want {
			t.Errorf("plugin mock --mode %s: exit %d, want %d", mode, code, want)
		}
		if err := k.WaitPluginsGone(context.Background()); err != nil {
			t.Error(err)
		}
	})
	if _, err := p.WaitLine(ctx(t), "SERVING "+mockResource+" ", 1); err != nil {
		t.Fatal(err)
	}
	return k, p
}

// checkWant is what `check --layer kube` must say after a scenario: a
// code with its status (FAIL unless given) naming the subject; "" when nothing in the kubelet's
// directory is wrong (no FAIL or WARN). gap, when set, is a cause the
// node shows that check has no code for: the check assertion is skipped
// with it (reported, not hidden).
type checkWant struct {
	code, status, subject, gap string
}

func assertCheck(t *testing.T, k *harness.Kubelet, w checkWant) {
	t.Helper()
	name := "check"
	if w.code != "" {
		name += "_" + w.code
	}
	t.Run(name, func(t *testing.T) {
		fs, raw := k.CheckKube(t)
		if w.gap != "" {
			t.Skipf("check has no code for this cause: %s; it said:\n%s", w.gap, summarize(fs))
		}
		if w.code == "" {
			for _, f := range fs {
				if f.Status == "FAIL" || f.Status == "WARN" {
					t.Errorf("check --layer kube: %s %s (%s): %s\n%s", f.Status, f.Code, f.Subject, f.Summary, raw)
				}
			}
			return
		}
		status := w.status
		if status == "" {
			status = "FAIL"
		}
		found := false
		for _, st := range strings.Split(status, "|") {
			found = found || hasFinding(fs, w.code, st, w.subject)
		}
		if !found {
			t.Errorf("check --layer kube: want %s %s naming %q; got:\n%s", w.code, status, w.subject, summarize(fs))
		}
	})
}

func summarize(fs []harness.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.Status + " " + f.Code + " (" + f.Subject + "): " + f.Summary + "\n")
	}
	return b.String()
}

// mockScenarios: every mode, what the manager must show, and what check
// must say afterwards.
var mockScenarios = map[string]func(t *testing.T, doc string){
	"healthy": func(t *testing.T, doc string) {
		k, p := startMock(t, "healthy", 0)
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
			t.Fatal(err)
		}
		docQuotes(t, doc, "capacity and allocatable N")
		pod := harness.Pod("one", mockResource, 1)
		if res := k.Admit(ctx(t), pod); !res.Admit {
			t.Fatalf("admit: %s: %s", res.Reason, res.Message)
		}
		opts, err := k.CreateContainer(ctx(t), pod, "ctr")
		if err != nil {
			t.Fatal(err)
		}
		if len(opts.Envs) != 1 || opts.Envs[0].Name != "MOCK_VISIBLE_DEVICES" || !regexp.MustCompile(`^mock-[01]$`).MatchString(opts.Envs[0].Value) {
			t.Fatalf("envs for the runtime: %+v, want MOCK_VISIBLE_DEVICES=mock-0 or mock-1", opts.Envs)
		}
		// "re-registers when kubelet.sock is recreated"
		k.Restart()
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitLine(ctx(t), "REGISTERED "+mockResource+" ", 2); err != nil {
			t.Fatal(err)
		}
		assertCheck(t, k, checkWant{})
	},
	"unhealthy": func(t *testing.T, doc string) {
		k, _ := startMock(t, "unhealthy", 0)
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 0); err != nil {
			t.Fatal(err)
		}
		docQuotes(t, doc, "capacity N and allocatable 0")
		res := k.Admit(ctx(t), harness.Pod("one", mockResource, 1))
		wantRejected(t, res.Admit, res.Reason, res.Message,
			"Allocate failed due to no healthy devices present; cannot allocate unhealthy devices fake.example.com/gpu, which is unexpected")
		assertCheck(t, k, checkWant{})
	},
	"flapping": func(t *testing.T, doc string) {
		k, _ := startMock(t, "flapping=300ms", 0)
		// allocatable swings between N and 0, several times.
		for range 2 {
			if _, err := k.WaitCount(ctx(t), mockResource, 2, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
				t.Fatal(err)
			}
		}
		// A pod allocated while it is 0: the manager's words, quoted.
		const msg = "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices fake.example.com/gpu, which is unexpected"
		for i := 0; ; i++ {
			if _, err := k.WaitCount(ctx(t), mockResource, 2, 0); err != nil {
				t.Fatal(err)
			}
			pod := harness.Pod("flap-"+string(rune('a'+i)), mockResource, 1)
			res := k.Admit(ctx(t), pod)
			if !res.Admit {
				wantRejected(t, res.Admit, res.Reason, res.Message, msg)
				break
			}
			// It flipped back to Healthy between the two calls: free the
			// device and try at the next Unhealthy phase.
			k.RemovePod(pod)
			if i == 5 {
				t.Fatal("no admission at allocatable 0 in 6 Unhealthy phases")
			}
		}
		docQuotes(t, doc, msg)
		assertCheck(t, k, checkWant{})
	},
	"zero-devices": func(t *testing.T, doc string) {
		k, _ := startMock(t, "zero-devices", 0)
		if _, err := k.WaitCount(ctx(t), mockResource, 0, 0); err != nil {
			t.Fatal(err)
		}
		docQuotes(t, doc, "capacity 0 and allocatable 0")
		res := k.Admit(ctx(t), harness.Pod("one", mockResource, 1))
		wantRejected(t, res.Admit, res.Reason, res.Message,
			"Allocate failed due to no healthy devices present; cannot allocate unhealthy devices fake.example.com/gpu, which is unexpected")
		assertCheck(t, k, checkWant{})
	},
	"slow-allocate": func(t *testing.T, doc string) {
		const delay = 300 * time.Millisecond
		k, _ := startMock(t, "slow-allocate="+delay.String(), 0)
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
			t.Fatal(err)
		}
		// The manager sets no deadline of its own: admission waits the
		// whole delay and succeeds (a bound below, not a latency target).
		start := time.Now()
		res := k.Admit(ctx(t), harness.Pod("one", mockResource, 1))
		took := time.Since(start)
		if !res.Admit || took < delay {
			t.Fatalf("admit: %v (%s: %s) after %v; want admitted after at least %v", res.Admit, res.Reason, res.Message, took, delay)
		}
		t.Logf("admission with slow-allocate=%v took %v", delay, took)
		assertCheck(t, k, checkWant{})
	},
	"fail-allocate": func(t *testing.T, doc string) {
		k, _ := startMock(t, "fail-allocate=planted failure", 0)
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
			t.Fatal(err)
		}
		const msg = "Allocate failed due to rpc error: code = Unknown desc = planted failure, which is unexpected"
		res := k.Admit(ctx(t), harness.Pod("one", mockResource, 1))
		wantRejected(t, res.Admit, res.Reason, res.Message, msg)
		docQuotes(t, doc, msg, "planted failure", "TEXT")
		// "the node still advertises the devices"
		if cp, al := k.Capacity().Count(mockResource); cp != 2 || al != 2 {
			t.Fatalf("after the failed Allocate: %d/%d, want 2/2", cp, al)
		}
		assertCheck(t, k, checkWant{})
	},
	"crash-allocate": func(t *testing.T, doc string) {
		k, _ := startMock(t, "crash-allocate", 3)
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
			t.Fatal(err)
		}
		// The process exits in the middle of the call: the kubelet reads
		// EOF, or ECONNRESET when the mock left bytes of the connection
		// unread (net/unix/af_unix.c unix_release_sock); both are the
		// kubelet's words, and the doc quotes both.
		res := k.Admit(ctx(t), harness.Pod("one", mockResource, 1))
		msg := "Allocate failed due to rpc error: code = Unavailable desc = error reading from server: EOF, which is unexpected"
		if strings.Contains(res.Message, "connection reset by peer") {
			msg = "Allocate failed due to rpc error: code = Unavailable desc = error reading from server: connection reset by peer, which is unexpected"
		}
		wantRejected(t, res.Admit, res.Reason, res.Message, msg)
		docQuotes(t, doc, msg)
		// The stream ended: every device unhealthy, capacity stays.
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 0); err != nil {
			t.Fatal(err)
		}
		docQuotes(t, doc, "capacity N, allocatable 0")
		// The process died without removing its socket: check finds it dead.
		assertCheck(t, k, checkWant{code: "KUBELET_PLUGIN_SOCKET_DEAD", subject: "accel-doctor-mock-fake.example.com_gpu.sock"})
	},
	"wrong-version": func(t *testing.T, doc string) {
		k, p := startMock(t, "wrong-version", 0)
		line, err := p.WaitLine(ctx(t), "REGISTER_FAILED "+mockResource+" ", 1)
		if err != nil {
			t.Fatal(err)
		}
		const msg = `requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]`
		if !strings.Contains(line, strings.NewReplacer(`"`, `\"`).Replace(msg)) {
			t.Fatalf("the mock's REGISTER_FAILED line %q does not carry the manager's %q", line, msg)
		}
		docQuotes(t, doc, msg)
		if c := k.Capacity(); c.Has(mockResource) {
			t.Fatalf("the refused resource is in the capacity: %v", c)
		}
		checkUnregistered(t, k)
	},
	"register-before-serve": func(t *testing.T, doc string) {
		k, p := startMock(t, "register-before-serve", 0)
		line, err := p.WaitLine(ctx(t), "REGISTER_FAILED "+mockResource+" ", 1)
		if err != nil {
			t.Fatal(err)
		}
		const msg = "failed to dial device plugin: context deadline exceeded"
		if !strings.Contains(line, msg) {
			t.Fatalf("the mock's REGISTER_FAILED line %q does not carry the manager's %q", line, msg)
		}
		docQuotes(t, doc, msg)
		if c := k.Capacity(); c.Has(mockResource) {
			t.Fatalf("the refused resource is in the capacity: %v", c)
		}
		checkUnregistered(t, k)
	},
	"no-reregister": func(t *testing.T, doc string) {
		k, p := startMock(t, "no-reregister", 0)
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
			t.Fatal(err)
		}
		// The manager writes the checkpoint just after it counts the
		// devices; a kubelet on a node has long written it before it
		// restarts.
		waitCheckpointRegistered(t, k, mockResource, 2)
		k.Restart()
		sock := filepath.Join(k.Dir, "accel-doctor-mock-fake.example.com_gpu.sock")
		if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the mock's socket after the restart: want wiped, got %v", err)
		}
		c := k.Capacity()
		if cp, al := c.Count(mockResource); !c.Has(mockResource) || cp != 0 || al != 0 {
			t.Fatalf("want %s 0/0 (restored from the checkpoint, no device); got %v", mockResource, c)
		}
		docQuotes(t, doc, "capacity 0 and allocatable 0")
		const msg = "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices fake.example.com/gpu, which is unexpected"
		res := k.Admit(ctx(t), harness.Pod("one", mockResource, 1))
		wantRejected(t, res.Admit, res.Reason, res.Message, msg)
		docQuotes(t, doc, "no healthy devices present; cannot allocate unhealthy devices fake.example.com/gpu")
		if n := p.Count("REGISTERED "); n != 1 {
			t.Fatalf("the mock registered %d times, want once", n)
		}
		// WARN or FAIL: FAIL when the restarted kubelet wrote the
		// checkpoint since (it does on any plugin's update), WARN when
		// the one it restored from is older than its kubelet.sock.
		assertCheck(t, k, checkWant{code: "KUBELET_RESOURCE_NO_PLUGIN", status: "WARN|FAIL", subject: mockResource})
	},
	"duplicate": func(t *testing.T, doc string) {
		k, p := startMock(t, "duplicate=200ms", 0)
		if _, err := p.WaitLine(ctx(t), "REGISTERED "+mockResource+" ", 2); err != nil {
			t.Fatal(err)
		}
		// "capacity stays N, not 2N": one endpoint per resource.
		if _, err := k.WaitCount(ctx(t), mockResource, 2, 2); err != nil {
			t.Fatal(err)
		}
		// GetPreferredAllocation and Allocate go to the instance that
		// registered last (mockb-*); once the first instance's resent list
		// is current, the kubelet offers the second its IDs, which it does
		// not know.
		want := regexp.MustCompile(`^Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: rpc error: code = InvalidArgument desc = GetPreferredAllocation available: unknown device "(mock-[01])" of resource fake\.example\.com/gpu, which is unexpected$`)
		var got string
		for i := 0; got == "" && i < 20; i++ {
			pod := harness.Pod("dup-"+string(rune('a'+i)), mockResource, 1)
			res := k.Admit(ctx(t), pod)
			if res.Admit {
				// The second instance's list was current: its own ID.
				k.RemovePod(pod)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if res.Reason != "UnexpectedAdmissionError" || !want.MatchString(res.Message) {
				t.Fatalf("admission: %s: %q; want UnexpectedAdmissionError matching %s", res.Reason, res.Message, want)
			}
			got = res.Message
		}
		if got == "" {
			t.Fatal("no admission was given an ID of the first instance in 20 tries")
		}
		t.Logf("rejected: %s", got)
		id := want.FindStringSubmatch(got)[1]
		docQuotes(t, doc, strings.ReplaceAll(got, `"`, `\"`), id, "mock-0")
		assertCheck(t, k, checkWant{code: "KUBELET_PLUGIN_DUPLICATE", status: "WARN", subject: mockResource})
	},
}

// Every mode the mock has is a scenario here, and each runs.
func TestMockModes(t *testing.T) {
	docs, modes := mockDocs(t)
	var names []string
	for m := range mockScenarios {
		names = append(names, m)
	}
	slices.Sort(names)
	sorted := slices.Sorted(slices.Values(modes))
	if !slices.Equal(names, sorted) {
		t.Fatalf("scenarios %v, the mock's modes %v", names, sorted)
	}
	for _, m := range modes {
		t.Run(m, func(t *testing.T) { mockScenarios[m](t, docs[m]) })
	}
}

// waitCheckpointRegistered waits until the manager's checkpoint lists n
// registered devices of resource.
func waitCheckpointRegistered(t *testing.T, k *harness.Kubelet, resource string, n int) {
	t.Helper()
	c := ctx(t)
	for {
		if b, err := os.ReadFile(filepath.Join(k.Dir, harness.CheckpointFile)); err == nil {
			var cp checkpoint
			if json.Unmarshal(b, &cp) == nil && len(cp.Data.RegisteredDevices[resource]) == n {
				return
			}
		}
		select {
		case <-c.Done():
			t.Fatalf("the checkpoint never listed %d devices of %s", n, resource)
		case <-time.After(time.Millisecond):
		}
	}
}

// checkUnregistered: the mock's socket answers and the kubelet refused its
// registration. With no checkpoint written since (the manager writes it on
// a device list or an allocation; none came), check cannot tell and says
// so; once another plugin's registration has made the manager write it
// (as on a node with any other plugin), check names the mock's resource
// as not registered.
func checkUnregistered(t *testing.T, k *harness.Kubelet) {
	t.Helper()
	sock := "accel-doctor-mock-fake.example.com_gpu.sock"
	assertCheck(t, k, checkWant{code: "KUBELET_PLUGIN_REGISTRATION_UNKNOWN", status: "NOT_RUN", subject: sock})
	// check takes a checkpoint as proof only when it was written more
	// than a second after the socket was bound (a registration the
	// kubelet accepts writes it within that): the other plugin comes
	// after that second, as any later device update on a node would.
	fi, err := os.Stat(filepath.Join(k.Dir, sock))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(fi.ModTime().Add(1100 * time.Millisecond)))
	other := newStub(t, k.Dir, stubResource, 1)
	other.run()
	t.Cleanup(other.stop)
	if _, err := k.WaitCount(ctx(t), stubResource, 1, 1); err != nil {
		t.Fatal(err)
	}
	waitCheckpointRegistered(t, k, stubResource, 1)
	assertCheck(t, k, checkWant{code: "KUBELET_PLUGIN_NOT_REGISTERED", subject: sock})
}
