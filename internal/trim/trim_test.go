package trim

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssFile:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// Image gives back the executable's clean pages, and the process runs on.
func TestImage(t *testing.T) {
	before := rssFileKiB(t)
	Image()
	after := rssFileKiB(t)
	if after >= before {
		t.Errorf("RssFile %d KiB before, %d KiB after: nothing given back", before, after)
	}
	if s := strings.Repeat("x", 3); s != "xxx" {
		t.Fatal(s)
	}
	t.Logf("RssFile %d KiB -> %d KiB", before, after)
}

// A PIE build's relocated read-only data (.data.rel.ro: anonymous pages
// in a read-only file mapping) survives the trim: the program runs on
// and prints what it computed. Discarding those pages crashed it.
func TestImagePIE(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a PIE")
	}
	bin := filepath.Join(t.TempDir(), "pie")
	build := exec.Command("go", "build", "-buildmode=pie", "-o", bin, "./testdata/pie")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("this toolchain cannot build a PIE here: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok ") || !strings.Contains(string(out), "9 words") {
		t.Fatalf("the PIE after its trim: %v\n%s", err, out)
	}
}

// clean keeps the executable's read-only private mappings that hold no
// anonymous page, and nothing else.
func TestClean(t *testing.T) {
	smaps := `00400000-00500000 r-xp 00000000 08:01 12 /bin/x
Size:               1024 kB
Anonymous:             0 kB
00500000-00600000 r--p 00100000 08:01 12 /bin/x
Anonymous:             8 kB
00600000-00700000 rw-p 00200000 08:01 12 /bin/x
Anonymous:             0 kB
00700000-00800000 r--p 00000000 08:01 13 /bin/y
Anonymous:             0 kB
00800000-00900000 r--s 00000000 08:01 12 /bin/x
Anonymous:             0 kB
00900000-00a00000 r--p 00300000 08:01 12 /bin/x
Size:               1024 kB
`
	got := clean([]byte(smaps), "/bin/x")
	if len(got) != 1 || got[0] != (mapping{0x400000, 0x500000}) {
		t.Errorf("clean: %+v, want only the r-xp mapping without anonymous pages", got)
	}
}
