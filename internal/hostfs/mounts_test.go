package hostfs

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseMountPoints(t *testing.T) {
	b := []byte(`22 1 0:21 / / rw,relatime - overlay overlay rw
23 22 0:22 / /host/sys ro - sysfs sysfs ro
24 22 8:1 /var/lib/kubelet/device-plugins /host/var/lib/kubelet/device-plugins ro - ext4 /dev/sda1 rw
25 22 8:1 /srv/a\040b /host/with\040space ro - ext4 /dev/sda1 rw
`)
	got, err := ParseMountPoints(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/", "/host/sys", "/host/var/lib/kubelet/device-plugins", "/host/with space"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
	if _, err := ParseMountPoints([]byte("garbage\n22 1 0:21 / / rw\n")); err == nil {
		t.Error("a line without a mount point: no error")
	}
}

func FuzzParseMountPoints(f *testing.F) {
	f.Add([]byte("22 1 0:21 / / rw - overlay overlay rw\n"))
	f.Add([]byte(`1 2 3 4 /a\0\1\77\777\134x`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, _ := ParseMountPoints(b)
		for _, p := range ps {
			if !strings.HasPrefix(p, "/") {
				t.Fatalf("mount point %q not absolute", p)
			}
		}
	})
}

// The decision: a root with mounts under it (a pod's /host) gives only
// what those mounts hold; a root with none (a fixture tree) and the
// paths inside a mount are judged as before.
func TestNotGivenDecision(t *testing.T) {
	pod := []string{"/", "/proc", "/host/sys", "/host/var/lib/kubelet/device-plugins", "/host/var/lib/kubelet/plugins_registry"}
	for _, tc := range []struct {
		mounts  []string
		dir, p  string
		holder  string
		notGive bool
	}{
		{pod, "/host", "/var/lib/kubelet/dra_manager_state", "/", true},
		{pod, "/host", "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint", "", false},
		{pod, "/host", "/sys/bus/pci/devices", "", false},
		{pod, "/host", "/etc/os-release", "/", true},
		// The whole kubelet directory mounted (the dra-state component).
		{append(slices.Clone(pod), "/host/var/lib/kubelet"), "/host", "/var/lib/kubelet/dra_manager_state", "", false},
		// The host's / at /host: everything is given.
		{[]string{"/", "/host"}, "/host", "/var/lib/kubelet/dra_manager_state", "", false},
		// A fixture tree: no mount under it.
		{pod, "/tmp/fixture", "/var/lib/kubelet/dra_manager_state", "", false},
		// "/hostile" is not under "/host".
		{[]string{"/", "/hostile/x"}, "/host", "/a", "", false},
	} {
		holder, ng := notGiven(tc.mounts, tc.dir, tc.p)
		if ng != tc.notGive || holder != tc.holder {
			t.Errorf("%v %s %s: %q %v, want %q %v", tc.mounts, tc.dir, tc.p, holder, ng, tc.holder, tc.notGive)
		}
	}
}

// On the real kernel: a root assembled from bind mounts in a private
// mount namespace (of this test's thread only) does not cover what no
// mount gives it, and says which path; once the directory is mounted it
// does.
func TestNotGivenRealMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bind mounts in a private mount namespace")
	}
	host, root := t.TempDir(), t.TempDir()
	for _, d := range []string{host + "/var/lib/kubelet/device-plugins", root + "/var/lib/kubelet/device-plugins"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(host+"/var/lib/kubelet/dra_manager_state", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread stays locked: it exits with the goroutine, and its
		// mount namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			t.Errorf("make / private: %v", err)
			return
		}
		bind := func(src, dst string) bool {
			if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
				t.Errorf("bind %s %s: %v", src, dst, err)
				return false
			}
			return true
		}
		if !bind(host+"/var/lib/kubelet/device-plugins", root+"/var/lib/kubelet/device-plugins") {
			return
		}
		r, err := New(root)
		if err != nil {
			t.Error(err)
			return
		}
		const state = "/var/lib/kubelet/dra_manager_state"
		why, ng := r.NotGiven(state)
		if !ng || !strings.Contains(why, filepath.Join(root, state)) || !strings.Contains(why, "the host's "+state+" was not given") {
			t.Errorf("NotGiven(%s) = %q, %v: want true, naming the path", state, why, ng)
		}
		if r.Covers(state) {
			t.Errorf("Covers(%s) with only device-plugins/ mounted", state)
		}
		if _, ng := r.NotGiven("/var/lib/kubelet/device-plugins/kubelet.sock"); ng {
			t.Error("a path inside the mount is not given")
		}
		if !bind(host+"/var/lib/kubelet", root+"/var/lib/kubelet") {
			return
		}
		r2, err := New(root)
		if err != nil {
			t.Error(err)
			return
		}
		if _, ng := r2.NotGiven(state); ng || !r2.Exists(state) {
			t.Errorf("with /var/lib/kubelet mounted: not given %v, exists %v", ng, r2.Exists(state))
		}
	}()
	<-done
}
