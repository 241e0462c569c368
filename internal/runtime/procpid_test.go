package runtime

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// A container's init as Linux 6.x prints it (fs/proc/array.c), trimmed of
// the lines the parser skips but for a few kept to show they are skipped.
const statusContainer = "Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t31337\nPid:\t31337\nPPid:\t31320\n" +
	"Uid:\t100000\t100000\t100000\t100000\nGid:\t100000\t100000\t100000\t100005\nFDSize:\t64\nGroups:\t100010 100011 \n" +
	"NStgid:\t31337\t1\nNSpid:\t31337\t1\nNSpgid:\t31337\t1\nVmPeak:\t    1200 kB\n" +
	"CapInh:\t0000000000000000\nCapPrm:\t00000000a80425fb\nCapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\nCapAmb:\t0000000000000000\n" +
	"NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\nSpeculation_Store_Bypass:\tthread force mitigated\n"

// A 4.0 kernel: no NSpid, CapAmb, NoNewPrivs or Seccomp_filters.
const statusOld = "Name:\tbash\nState:\tR (running)\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n" +
	"CapInh:\t0000000000000000\nCapPrm:\t0000003fffffffff\nCapEff:\t0000003fffffffff\nCapBnd:\t0000003fffffffff\nSeccomp:\t0\n"

func ptrTo[T any](v T) *T { return &v }

func TestParseProcStatus(t *testing.T) {
	dockerDefault := CapSet(0xa80425fb)
	for _, tc := range []struct {
		name    string
		in      string
		want    ProcStatus
		wantErr bool
	}{
		{"container", statusContainer, ProcStatus{Name: "sleep", State: "S (sleeping)",
			UID: [4]uint32{100000, 100000, 100000, 100000}, GID: [4]uint32{100000, 100000, 100000, 100005},
			Groups: []uint32{100010, 100011}, NSpid: []int{31337, 1},
			CapPrm: dockerDefault, CapEff: dockerDefault, CapBnd: dockerDefault, CapAmb: ptrTo(CapSet(0)),
			NoNewPrivs: ptrTo(true), Seccomp: ptrTo(2), SeccompFilters: ptrTo(1)}, false},
		{"old kernel", statusOld, ProcStatus{Name: "bash", State: "R (running)", Groups: []uint32{},
			CapPrm: 0x3fffffffff, CapEff: 0x3fffffffff, CapBnd: 0x3fffffffff, Seccomp: ptrTo(0)}, false},
		{"empty", "", ProcStatus{}, true},
		{"bad CapEff", strings.Replace(statusOld, "CapEff:\t0000003fffffffff", "CapEff:\tzz", 1), ProcStatus{Name: "bash", State: "R (running)", Groups: []uint32{},
			CapPrm: 0x3fffffffff, CapBnd: 0x3fffffffff, Seccomp: ptrTo(0)}, true},
		{"CapEff twice", statusOld + "CapEff:\t0000000000000000\n", ProcStatus{}, true},
		{"no Uid", strings.Replace(statusOld, "Uid:", "Xid:", 1), ProcStatus{}, true},
		{"three Uids", strings.Replace(statusOld, "Uid:\t0\t0\t0\t0", "Uid:\t0\t0\t0", 1), ProcStatus{}, true},
		{"NUL in Seccomp", strings.Replace(statusOld, "Seccomp:\t0", "Seccomp:\t0\x00", 1), ProcStatus{}, true},
		{"Seccomp mode 3", strings.Replace(statusOld, "Seccomp:\t0", "Seccomp:\t3", 1), ProcStatus{}, true},
		{"NoNewPrivs 2", statusOld + "NoNewPrivs:\t2\n", ProcStatus{}, true},
		{"empty NSpid", statusOld + "NSpid:\t\n", ProcStatus{}, true},
		{"64 KiB line of a skipped field", "Cpus_allowed_list:\t" + strings.Repeat("0-1,", 16<<10) + "\n" + statusOld, ProcStatus{Name: "bash", State: "R (running)", Groups: []uint32{},
			CapPrm: 0x3fffffffff, CapEff: 0x3fffffffff, CapBnd: 0x3fffffffff, Seccomp: ptrTo(0)}, false},
		{"64 KiB CapEff", strings.Replace(statusOld, "CapEff:\t0000003fffffffff", "CapEff:\t"+strings.Repeat("f", 64<<10), 1), ProcStatus{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProcStatus([]byte(tc.in))
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error for %q", short(tc.in))
				}
				if tc.want.Name == "" {
					return
				}
				// What parsed stands beside the error.
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("partial result (-want +got):\n%s", d)
				}
				return
			}
			testutil.CheckParse(t, got, err, tc.want, false)
		})
	}
}

func TestStatusZombie(t *testing.T) {
	for state, want := range map[string]bool{"Z (zombie)": true, "X (dead)": true, "S (sleeping)": false, "": false} {
		if got := (ProcStatus{State: state}).Zombie(); got != want {
			t.Errorf("%q: Zombie() = %v", state, got)
		}
	}
}

// The kernel's capability list, by name and bit, both ways.
func TestCapabilityNames(t *testing.T) {
	for bit, name := range map[int]string{0: "CAP_CHOWN", 1: "CAP_DAC_OVERRIDE", 14: "CAP_IPC_LOCK", 21: "CAP_SYS_ADMIN",
		27: "CAP_MKNOD", 38: "CAP_PERFMON", 39: "CAP_BPF", 40: "CAP_CHECKPOINT_RESTORE", 41: "CAP_41", 63: "CAP_63"} {
		if got := CapabilityName(bit); got != name {
			t.Errorf("bit %d: %s, want %s", bit, got, name)
		}
		if bit <= 40 {
			if b, ok := CapabilityBit(name); !ok || b != bit {
				t.Errorf("%s: bit %d %v", name, b, ok)
			}
		}
	}
	for _, n := range []string{"sys_admin", "cap_sys_admin", "SYS_ADMIN"} {
		if b, ok := CapabilityBit(n); !ok || b != 21 {
			t.Errorf("%s: %d %v", n, b, ok)
		}
	}
	if len(capNames) != 41 {
		t.Errorf("%d capabilities, want 41 (CAP_LAST_CAP 40)", len(capNames))
	}
	// Docker's and runc's default set, as CapEff prints it.
	c, unknown := CapSetOf([]string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE", "CAP_BOGUS"})
	if c != 0xa80425fb || len(unknown) != 1 {
		t.Errorf("docker defaults: %s, unknown %v", c, unknown)
	}
	if s := CapSet(1<<14 | 1<<21).String(); s != "0000000000204000 (CAP_IPC_LOCK,CAP_SYS_ADMIN)" {
		t.Errorf("String: %s", s)
	}
	for _, bad := range []string{"", "0x10", "12345678901234567", "-1", "fffffffffffffffff"} {
		if _, err := ParseCapSet(bad); err == nil {
			t.Errorf("ParseCapSet(%q) took it", bad)
		}
	}
}

const limitsReal = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max stack size            8388608              unlimited            bytes     
Max processes             96365                96365                processes 
Max open files            1048576              1048576              files     
Max locked memory         65536                131072               bytes     
Max nice priority         0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`

func TestParseProcLimits(t *testing.T) {
	want := ProcLimits{
		"Max cpu time":         {RLimInfinity, RLimInfinity, "seconds"},
		"Max stack size":       {8388608, RLimInfinity, "bytes"},
		"Max processes":        {96365, 96365, "processes"},
		"Max open files":       {1048576, 1048576, "files"},
		"Max locked memory":    {65536, 131072, "bytes"},
		"Max nice priority":    {0, 0, ""},
		"Max realtime timeout": {RLimInfinity, RLimInfinity, "us"},
	}
	got, err := ParseProcLimits([]byte(limitsReal))
	testutil.CheckParse(t, got, err, want, false)
	if m, ok := got.MemLock(); !ok || m.String() != "soft 65536, hard 131072 bytes" {
		t.Errorf("MemLock: %v %v", m, ok)
	}
	for name, in := range map[string]string{
		"empty":           "",
		"no header":       "Max locked memory 65536 65536 bytes\n",
		"one value":       "Limit x\nMax locked memory 65536\n",
		"no name":         "Limit x\n65536 65536 bytes\n",
		"words after":     "Limit x\nMax locked memory 1 2 bytes and more\n",
		"row twice":       "Limit x\nMax locked memory 1 2 bytes\nMax locked memory 1 2 bytes\n",
		"negative":        "Limit x\nMax locked memory -1 2 bytes\n",
		"NUL in a number": "Limit x\nMax locked memory 1\x002 2 bytes\n",
	} {
		got, err := ParseProcLimits([]byte(in))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, %v", name, got, err)
		}
	}
	// A bad row does not hide the good ones.
	got, err = ParseProcLimits([]byte(limitsReal + "Max garbage x y\n"))
	if err == nil || len(got) != len(want) {
		t.Errorf("partial: %d rows, %v", len(got), err)
	}
}

func TestParseEnvironNames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		want      []string
		malformed int
	}{
		{"plain", "PATH=/bin\x00NVIDIA_VISIBLE_DEVICES=all\x00HOME=/root\x00", []string{"HOME", "NVIDIA_VISIBLE_DEVICES", "PATH"}, 0},
		{"no final NUL", "A=1\x00B=2", []string{"A", "B"}, 0},
		{"value with =", "A=b=c\x00", []string{"A"}, 0},
		{"empty value", "A=\x00", []string{"A"}, 0},
		{"twice", "A=1\x00A=2\x00", []string{"A"}, 0},
		{"no =", "secretwithoutname\x00A=1\x00", []string{"A"}, 1},
		{"empty name", "=x\x00", nil, 1},
		{"control char in name", "A\x1bB=1\x00", nil, 1},
		{"space in name", "A B=1\x00", nil, 1},
		{"empty entries", "\x00\x00A=1\x00\x00", []string{"A"}, 0},
		{"long name", strings.Repeat("N", maxEnvName+1) + "=1\x00", nil, 1},
		{"empty", "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, bad := ParseEnvironNames([]byte(tc.in))
			if d := cmp.Diff(tc.want, got); d != "" || bad != tc.malformed {
				t.Errorf("names (-want +got):\n%s malformed %d, want %d", d, bad, tc.malformed)
			}
		})
	}
	e := EnvNames{Read: ProcRead{State: ReadOK}, Names: []string{"A", "C"}}
	if !e.Has("A") || e.Has("B") || !e.Has("C") || e.Has("") {
		t.Error("Has")
	}
}

// Values never come out: whatever the environment holds, only the part of
// each entry before its first '=' is returned.
func FuzzParseEnvironNames(f *testing.F) {
	f.Add([]byte("PATH=/bin\x00TOKEN=s3cret\x00"))
	f.Add([]byte("=\x00==\x00a=\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		names, bad := ParseEnvironNames(b)
		if bad < 0 || len(names) > len(b) {
			t.Fatalf("%d names, %d malformed from %d bytes", len(names), bad, len(b))
		}
		for _, n := range names {
			if strings.ContainsAny(n, "=\x00") || n == "" || !bytes.Contains(b, []byte(n+"=")) {
				t.Fatalf("name %q is not an entry's name in %q", n, b)
			}
		}
	})
}

func FuzzParseProcStatus(f *testing.F) {
	f.Add([]byte(statusContainer))
	f.Add([]byte(statusOld))
	f.Add([]byte("CapEff:\t\nUid:\n:::\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseProcStatus(b)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		if s.Seccomp != nil && (*s.Seccomp < 0 || *s.Seccomp > 2) {
			t.Fatalf("seccomp mode %d", *s.Seccomp)
		}
	})
}

func FuzzParseProcLimits(f *testing.F) {
	f.Add([]byte(limitsReal))
	f.Add([]byte("Limit\nMax x unlimited unlimited\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseProcLimits(b)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		for name := range l {
			if name == "" {
				t.Fatal("a row without a name")
			}
		}
	})
}

// Hostile files are linear and bounded: an 8 MiB status or limits of
// garbage, NULs, or one huge line gives an error (or nothing), never a
// panic, and keeps at most a few errors.
func TestProcParsersHostile(t *testing.T) {
	inputs := map[string][]byte{
		"8 MiB of NULs":      bytes.Repeat([]byte{0}, 8<<20),
		"8 MiB of newlines":  bytes.Repeat([]byte{'\n'}, 8<<20),
		"one 8 MiB line":     bytes.Repeat([]byte("Cap"), 8<<20/3),
		"a million bad rows": []byte("Limit\n" + strings.Repeat("Max x y z\n", 1<<20)),
		"a million keys":     []byte(strings.Repeat("CapEff:\t0\n", 1<<20)),
	}
	for name, b := range inputs {
		if _, err := ParseProcStatus(b); err == nil {
			t.Errorf("status %s: no error", name)
		}
		_, err := ParseProcLimits(b)
		if err == nil {
			t.Errorf("limits %s: no error", name)
		} else if n := strings.Count(err.Error(), "\n"); n > maxLineErrors+1 {
			t.Errorf("limits %s: %d error lines", name, n)
		}
		ParseEnvironNames(b)
	}
}
