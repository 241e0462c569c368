package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCgroup creates a uniquely named cgroup directory under parent
// ("accel-doctor-test-<pid>-<random>", never a sandbox name, so sandbox
// leak counts ignore it) and removes it in t.Cleanup, even when the test
// fails, retrying while a helper thread or process is still leaving it. A
// cgroup that cannot be made skips the test (not root, no such hierarchy).
func TestCgroup(t testing.TB, parent string) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(parent, fmt.Sprintf("accel-doctor-test-%d-%s", os.Getpid(), hex.EncodeToString(b[:])))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup under %s: %v", parent, err)
	}
	t.Cleanup(func() {
		var err error
		for i := 0; i < 100; i++ {
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("remove test cgroup %s: %v", dir, err)
	})
	return dir
}
