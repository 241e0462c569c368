package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// BindNodeDir makes dir visible at nodePath, an absolute path of the node
// (/var/lib/kubelet/plugins, say), in the test binary's private mount
// namespace until the test ends, as bindKubeletDir does for KubeletDir.
//
// It is for paths that a plugin hands to the kubelet and that the kubelet
// uses as host paths: a DRA driver's registration names its service
// socket by absolute path (kubeletplugin's PluginDataDirectoryPath, by
// default /var/lib/kubelet/plugins/DRIVER/dra.sock), the kubelet dials
// that path, and `accel-doctor check --root ROOT` resolves it inside
// ROOT. With dir under Kubelet.Root at the same relative path, one socket
// is reached by both: the kubelet and the plugin in the namespace at
// nodePath, check at ROOT/nodePath.
//
// The host is never written: an existing nodePath is only covered, in
// this namespace; a missing one is made only when its nearest existing
// ancestor lies in the overlay Main put over KubeletDir's ancestor (whose
// upper layer is a tmpfs of this namespace). Otherwise, a node whose
// nodePath does not exist, the test skips, saying so.
func BindNodeDir(t testing.TB, nodePath, dir string) {
	t.Helper()
	if notRun != "" {
		t.Skip(notRun)
	}
	if !inNamespace {
		t.Fatal("harness: not in the test binary's private mount namespace: the package's TestMain must call harness.Main")
	}
	if !filepath.IsAbs(nodePath) || filepath.Clean(nodePath) != nodePath {
		t.Fatalf("BindNodeDir: %q is not a clean absolute path", nodePath)
	}
	switch fi, err := os.Stat(nodePath); {
	case err == nil && !fi.IsDir():
		t.Fatalf("BindNodeDir: %s is not a directory", nodePath)
	case errors.Is(err, fs.ErrNotExist):
		anc := filepath.Dir(nodePath)
		for {
			if _, err := os.Stat(anc); err == nil {
				break
			}
			anc = filepath.Dir(anc)
		}
		ours, err := inOurOverlay(anc)
		if err != nil {
			t.Fatal(err)
		}
		if !ours {
			t.Skipf("%s does not exist and %s is the host's: making it would write the host", nodePath, anc)
		}
		if err := os.MkdirAll(nodePath, 0o750); err != nil {
			t.Fatal(err)
		}
	case err != nil:
		t.Fatal(err)
	}
	if err := unix.Mount(dir, nodePath, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", dir, nodePath, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(nodePath, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", nodePath, err)
		}
	})
}

// inOurOverlay says whether p is at or under the mount point of the
// overlay privateKubeletDir made: an overlay whose upperdir is in this
// namespace's scratch tmpfs. The mount options are field 11, the super
// options, of /proc/self/mountinfo (proc(5)); mount points are escaped
// octal there (\040 for a space), which the paths compared here never
// hold.
func inOurOverlay(p string) (bool, error) {
	scratch := os.Getenv(envScratch)
	if scratch == "" {
		return false, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 || tail[0] != "overlay" {
			continue
		}
		mnt := fields[4]
		if p != mnt && !strings.HasPrefix(p, mnt+"/") {
			continue
		}
		for _, o := range strings.Split(tail[2], ",") {
			if o == "upperdir="+filepath.Join(scratch, "upper") {
				return true, nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("/proc/self/mountinfo: %w", err)
	}
	return false, nil
}
