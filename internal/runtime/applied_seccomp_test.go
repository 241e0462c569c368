package runtime

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func seccompSpec(def specs.LinuxSeccompAction, defErrno *uint, rules ...specs.LinuxSyscall) *specs.Spec {
	return &specs.Spec{Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{DefaultAction: def, DefaultErrnoRet: defErrno, Syscalls: rules}}}
}

func cond(index uint, v uint64) []specs.LinuxSeccompArg {
	return []specs.LinuxSeccompArg{{Index: index, Value: v, Op: specs.OpEqualTo}}
}

func TestEvaluateSeccomp(t *testing.T) {
	u := func(v uint) *uint { return &v }
	type verdict struct {
		Decision SyscallDecision
		Errno    uint
		Rule     int
	}
	for _, tc := range []struct {
		name string
		spec *specs.Spec
		arch string
		want map[string]verdict
	}{
		{"no profile", &specs.Spec{Linux: &specs.Linux{}}, "amd64",
			map[string]verdict{"ioctl": {SyscallAllowed, 0, -1}, "open": {SyscallAllowed, 0, -1}, "openat": {SyscallAllowed, 0, -1}, "mmap": {SyscallAllowed, 0, -1}}},
		{"allow list without ioctl (ERRNO default)", seccompSpec(specs.ActErrno, nil,
			specs.LinuxSyscall{Names: []string{"openat", "mmap", "read"}, Action: specs.ActAllow}), "amd64",
			map[string]verdict{"ioctl": {SyscallErrno, 1, -1}, "open": {SyscallErrno, 1, -1}, "openat": {SyscallAllowed, 0, 0}, "mmap": {SyscallAllowed, 0, 0}}},
		{"defaultErrnoRet ENOSYS", seccompSpec(specs.ActErrno, u(38)), "amd64",
			map[string]verdict{"ioctl": {SyscallErrno, 38, -1}}},
		{"deny ioctl (ALLOW default)", seccompSpec(specs.ActAllow, nil,
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActErrno, ErrnoRet: u(1)}), "amd64",
			map[string]verdict{"ioctl": {SyscallErrno, 1, 0}, "openat": {SyscallAllowed, 0, -1}}},
		{"a rule that repeats the default is skipped", seccompSpec(specs.ActErrno, nil,
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActErrno, ErrnoRet: u(1)},
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActAllow}), "amd64",
			// ERRNO with EPERM is the default's action: runc skips rule 0,
			// and rule 1 is the first unconditional one.
			map[string]verdict{"ioctl": {SyscallAllowed, 0, 1}}},
		{"ERRNO with another errno is not the default", seccompSpec(specs.ActErrno, nil,
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActErrno, ErrnoRet: u(19)},
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActAllow}), "amd64",
			map[string]verdict{"ioctl": {SyscallErrno, 19, 0}}},
		{"first unconditional rule wins", seccompSpec(specs.ActErrno, nil,
			specs.LinuxSyscall{Names: []string{"mmap"}, Action: specs.ActAllow},
			specs.LinuxSyscall{Names: []string{"mmap"}, Action: specs.ActKillProcess}), "amd64",
			map[string]verdict{"mmap": {SyscallAllowed, 0, 0}}},
		{"an unconditional rule replaces earlier conditional ones", seccompSpec(specs.ActAllow, nil,
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActErrno, Args: cond(1, 0x5401)},
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActTrap}), "amd64",
			map[string]verdict{"ioctl": {SyscallTrapped, 0, 1}}},
		{"conditions decide", seccompSpec(specs.ActErrno, nil,
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActAllow, Args: cond(1, 0x5401)}), "amd64",
			map[string]verdict{"ioctl": {SyscallDependsOnArgs, 0, 0}, "openat": {SyscallErrno, 1, -1}}},
		{"kill, log, trace, notify", seccompSpec(specs.ActKill, nil,
			specs.LinuxSyscall{Names: []string{"openat"}, Action: specs.ActLog},
			specs.LinuxSyscall{Names: []string{"mmap"}, Action: specs.ActTrace},
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: specs.ActNotify},
			specs.LinuxSyscall{Names: []string{"open"}, Action: specs.ActKillThread}), "amd64",
			// KILL_THREAD is KILL, the default: skipped.
			map[string]verdict{"openat": {SyscallAllowed, 0, 0}, "mmap": {SyscallTraced, 1, 1}, "ioctl": {SyscallNotified, 0, 2}, "open": {SyscallKilled, 0, -1}}},
		{"an action runc refuses", seccompSpec(specs.ActAllow, nil,
			specs.LinuxSyscall{Names: []string{"ioctl"}, Action: "SCMP_ACT_BOGUS"}), "amd64",
			map[string]verdict{"ioctl": {SyscallInvalid, 0, 0}, "openat": {SyscallAllowed, 0, -1}}},
		{"a default runc refuses", seccompSpec("SCMP_ACT_BOGUS", nil), "amd64",
			map[string]verdict{"ioctl": {SyscallInvalid, 0, -1}}},
		{"arm64 has no open", seccompSpec(specs.ActErrno, nil), "arm64",
			map[string]verdict{"open": {SyscallNotOnArch, 0, -1}, "openat": {SyscallErrno, 1, -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := make([]string, 0, len(tc.want))
			for n := range tc.want {
				names = append(names, n)
			}
			e := EvaluateSeccomp(tc.spec, tc.arch, names...)
			got := map[string]verdict{}
			for _, v := range e.Verdicts {
				got[v.Syscall] = verdict{v.Decision, v.Errno, v.Rule}
				if v.Evidence == "" || !strings.Contains(v.Evidence, v.Syscall) && v.Decision != SyscallInvalid {
					t.Errorf("%s: evidence %q", v.Syscall, v.Evidence)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestDeviceSyscalls(t *testing.T) {
	for arch, want := range map[string][]string{
		"amd64": {"ioctl", "open", "openat", "mmap"},
		"arm64": {"ioctl", "openat", "mmap"},
		"arm":   {"ioctl", "open", "openat", "mmap2"},
		"386":   {"ioctl", "open", "openat", "mmap", "mmap2"},
		"":      {"ioctl", "open", "openat", "mmap"},
	} {
		if d := cmp.Diff(want, DeviceSyscalls(arch)); d != "" {
			t.Errorf("%s (-want +got):\n%s", arch, d)
		}
	}
	for in, want := range map[string]string{"x86_64": "amd64", "aarch64\n": "arm64", "armv7l": "arm", "i686": "386", "ppc64le": "ppc64le", "loongarch64": "loong64", "riscv64": "riscv64"} {
		if got := NormalizeArch(in); got != want {
			t.Errorf("NormalizeArch(%q) = %s", in, got)
		}
	}
	if arch, r := HostArch(hostfs.MustNew("/")); arch == "" || !r.OK() {
		t.Errorf("HostArch: %q %v", arch, r)
	}
}

// Docker's default profile is an ERRNO allow list that allows the device
// syscalls unconditionally; the corpus's CRI-O config has no profile.
func TestSeccompOfRealConfigs(t *testing.T) {
	dir := testutil.CorpusDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "intel-device-plugins", "oci-config-crio-fpga.json"))
	if err != nil {
		t.Skipf("corpus config: %v", err)
	}
	s, err := ParseSpec(b, "oci-config-crio-fpga.json")
	if err != nil {
		t.Fatal(err)
	}
	e := EvaluateSeccomp(s, "amd64")
	if e.Profile || len(e.Verdicts) != 4 {
		t.Errorf("%+v", e)
	}
	for _, v := range e.Verdicts {
		if v.Decision != SyscallAllowed {
			t.Errorf("%+v", v)
		}
	}
}

func FuzzEvaluateSeccomp(f *testing.F) {
	f.Add([]byte(`{"linux":{"seccomp":{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["ioctl"],"action":"SCMP_ACT_ALLOW","args":[{"index":1,"value":1,"op":"SCMP_CMP_EQ"}]}]}}}`))
	f.Add([]byte(`{"linux":{"seccomp":{"defaultAction":"","syscalls":[{"names":null},{}]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s specs.Spec
		if json.Unmarshal(b, &s) != nil {
			return
		}
		for _, arch := range []string{"amd64", "arm64", ""} {
			e := EvaluateSeccomp(&s, arch)
			if len(e.Verdicts) != len(DeviceSyscalls(arch)) {
				t.Fatalf("%d verdicts", len(e.Verdicts))
			}
			for _, v := range e.Verdicts {
				if v.Rule >= 0 && (s.Linux == nil || s.Linux.Seccomp == nil || v.Rule >= len(s.Linux.Seccomp.Syscalls)) {
					t.Fatalf("rule %d out of range", v.Rule)
				}
			}
		}
	})
}
