package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Diagnosis is read-only, and the kernel is the witness: under strace -f,
// check, pci and cgroup eval, live and over the built-in demo, make no
// write-family system call on any path outside their own temporary unpack
// directory, standard output and standard error, and load or attach no BPF
// program.
func TestDiagnosisWritesNothing(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (.ci/run installs it)")
	}
	bin := accelDoctor(t)
	tmp := t.TempDir()
	for _, args := range [][]string{
		{"check"},
		{"check", "--snapshot", "demo"},
		{"check", "--root", hosts + "nvidia-h100x8-k8s-cgroupv1", "--pid", "4242", "--oci-spec", "/run/containerd/io.containerd.runtime.v2.task/k8s.io/5e1c0ffee0ddba11/config.json"},
		{"pci"},
		{"pci", "--snapshot", "demo", "-o", "json"},
		{"cgroup", "eval", "--pid", fmt.Sprint(os.Getpid())},
	} {
		log := filepath.Join(t.TempDir(), "strace.log")
		cmd := exec.Command(strace, append([]string{"-f", "-y", "-qq", "-o", log,
			"-e", "trace=%file,write,pwrite64,writev,pwritev,pwritev2,ftruncate,fchmod,fchown,bpf,mount,umount2", bin}, args...)...)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("%v: %v", args, err)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		bad, wrote := judgeTrace(string(b), tmp)
		for _, l := range bad {
			t.Errorf("%v writes to the host: %s", args, l)
		}
		if wrote == 0 {
			t.Errorf("%v: no write at all in the trace (not even its report): the tracer saw nothing\n%s", args, out)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", names(left))
	}
}

var (
	straceLine = regexp.MustCompile(`^\d+ +([a-z0-9_]+)\((.*)\) += (-?\d+|\?)`)
	fdPath     = regexp.MustCompile(`^-?\d+<([^>]*)>`)
	// A string argument, with the directory fd before it when there is one.
	pathArg = regexp.MustCompile(`(?:(?:AT_FDCWD|-?\d+)<([^>]*)>, )?"((?:[^"\\]|\\.)*)"`)
)

// Path-taking calls that change the file system.
var changesFS = map[string]bool{
	"mkdir": true, "mkdirat": true, "unlink": true, "unlinkat": true, "rmdir": true,
	"rename": true, "renameat": true, "renameat2": true, "symlink": true, "symlinkat": true,
	"link": true, "linkat": true, "mknod": true, "mknodat": true, "chmod": true, "fchmodat": true,
	"fchmodat2": true, "chown": true, "lchown": true, "fchownat": true, "truncate": true,
	"utimes": true, "utimensat": true, "setxattr": true, "lsetxattr": true, "removexattr": true,
	"lremovexattr": true, "creat": true,
}

// judgeTrace returns the lines that change something outside tmp, and the
// number of write calls seen (to stdout, stderr, tmp: proof of tracing).
func judgeTrace(trace, tmp string) (bad []string, writes int) {
	inTmp := func(p string) bool { return p == tmp || strings.HasPrefix(p, tmp+"/") }
	// A relative path of an *at call is relative to the directory fd
	// just before it, which strace -y shows as fd<path> (AT_FDCWD<cwd>).
	paths := func(args string) []string {
		var out []string
		for _, m := range pathArg.FindAllStringSubmatch(args, -1) {
			p := m[2]
			if !strings.HasPrefix(p, "/") && m[1] != "" {
				p = filepath.Join(m[1], p)
			}
			out = append(out, p)
		}
		return out
	}
	for _, line := range strings.Split(trace, "\n") {
		m := straceLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[3], "-") {
			continue // not a call, or one that failed: nothing changed
		}
		call, args := m[1], m[2]
		switch {
		case strings.HasPrefix(call, "write") || strings.HasPrefix(call, "pwrite") ||
			call == "ftruncate" || call == "fchmod" || call == "fchown":
			writes++
			if f := fdPath.FindStringSubmatch(args); f != nil && strings.HasPrefix(f[1], "/") && !inTmp(f[1]) {
				bad = append(bad, line)
			}
		case call == "open" || call == "openat" || call == "openat2":
			if regexp.MustCompile(`O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND`).MatchString(args) {
				if ps := paths(args); len(ps) == 0 || !inTmp(ps[0]) {
					bad = append(bad, line)
				}
			}
		case changesFS[call]:
			ps := paths(args)
			if strings.HasPrefix(call, "symlink") && len(ps) > 0 {
				ps = ps[1:] // the first string is the link's content, not a path written
			}
			for _, p := range ps {
				if !inTmp(p) {
					bad = append(bad, line)
					break
				}
			}
		case call == "bpf":
			if regexp.MustCompile(`BPF_PROG_LOAD|BPF_PROG_ATTACH|BPF_PROG_DETACH|BPF_LINK_CREATE|BPF_MAP_CREATE|BPF_MAP_UPDATE_ELEM|BPF_OBJ_PIN`).MatchString(args) {
				bad = append(bad, line)
			}
		case call == "mount" || call == "umount2":
			bad = append(bad, line)
		}
	}
	return bad, writes
}

// The judge itself: a trace of a write outside tmp is caught, one inside
// is not.
func TestJudgeTrace(t *testing.T) {
	trace := `1 openat(AT_FDCWD</>, "/etc/passwd", O_WRONLY|O_CLOEXEC) = 3</etc/passwd>
1 write(3</etc/passwd>, "x", 1) = 1
1 openat(AT_FDCWD</>, "/t/a", O_WRONLY|O_CREAT|O_EXCL) = 4</t/a>
1 write(4</t/a>, "x", 1) = 1
1 write(1<pipe:[12]>, "report", 6) = 6
1 mkdirat(AT_FDCWD</>, "/sys/fs/cgroup/x", 0755) = 0
1 mkdirat(AT_FDCWD</>, "/sys/fs/cgroup/y", 0755) = -1 EACCES (Permission denied)
1 symlinkat("/etc", AT_FDCWD</>, "/t/l") = 0
1 unlinkat(5</t/d>, "f", 0) = 0
1 unlinkat(5</etc>, "passwd", 0) = 0
1 symlinkat("/etc/x", 9</t/d>, "l") = 0
1 symlinkat("/t/x", 9</etc>, "l") = 0
1 bpf(BPF_PROG_LOAD, {prog_type=BPF_PROG_TYPE_CGROUP_DEVICE}, 148) = 5
1 bpf(BPF_PROG_QUERY, {query={target_fd=3}}, 40) = 0
`
	bad, writes := judgeTrace(trace, "/t")
	if writes != 3 || len(bad) != 6 {
		t.Errorf("writes %d, bad %d:\n%s", writes, len(bad), strings.Join(bad, "\n"))
	}
}
