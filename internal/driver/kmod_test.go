package driver

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// The alias lines below are in the form depmod writes them from the
// drivers' PCI ID tables (scripts/mod/file2alias.c): nvidia.ko claims
// every NVIDIA VGA and 3D controller (nv_pci_table in
// kernel-open/nvidia/nv-pci.c), nouveau every NVIDIA display controller
// (nouveau_drm_pci_table), amdgpu lists device ids (pciidlist in
// amdgpu_drv.c; 0x740f is the Instinct MI210).
const testAliases = `# Aliases extracted from modules themselves.
alias pci:v000010DEd*sv*sd*bc03sc*i* nouveau
alias pci:v000012D2d*sv*sd*bc03sc*i* nouveau
alias pci:v00001002d0000740Fsv*sd*bc*sc*i* amdgpu
alias pci:v00001002d000074A1sv*sd*bc*sc*i* amdgpu
alias usb:v0BDAp8153d*dc*dsc*dp*ic*isc*ip*in* r8152
alias pci:v000010DEd*sv*sd*bc03sc00i00* nvidia
alias pci:v000010DEd*sv*sd*bc03sc02i00* nvidia
`

func TestParseModulesAlias(t *testing.T) {
	got, err := ParseModulesAlias([]byte(testAliases), "modules.alias", "pci:")
	if err != nil {
		t.Fatal(err)
	}
	want := []Alias{
		{"pci:v000010DEd*sv*sd*bc03sc*i*", "nouveau", 2},
		{"pci:v000012D2d*sv*sd*bc03sc*i*", "nouveau", 3},
		{"pci:v00001002d0000740Fsv*sd*bc*sc*i*", "amdgpu", 4},
		{"pci:v00001002d000074A1sv*sd*bc*sc*i*", "amdgpu", 5},
		{"pci:v000010DEd*sv*sd*bc03sc00i00*", "nvidia", 7},
		{"pci:v000010DEd*sv*sd*bc03sc02i00*", "nvidia", 8},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, c := range []struct {
		name, in string
		n        int
	}{
		{"garbage", "\x7fELF\x02\x01\x01\x00\x00binary\n", 0},
		{"a bad line among good", "alias pci:v00001002d0000740Fsv*sd*bc*sc*i* amdgpu\nalias onlytwo\n", 1},
		{"comments only", "# Aliases extracted from modules themselves.\n", 0},
		{"empty", "", 0},
		{"module name with a slash", "alias pci:v* ../../x\n", 0},
	} {
		got, err := ParseModulesAlias([]byte(c.in), "modules.alias", "pci:")
		if err == nil || len(got) != c.n {
			t.Errorf("%s: %d aliases, %v; want %d and an error", c.name, len(got), err, c.n)
		}
	}
	_, err = ParseModulesAlias([]byte("alias x\n"), "f", "pci:")
	var sk *SkippedLinesError
	if !errors.As(err, &sk) || sk.First != 1 || sk.Count != 1 {
		t.Errorf("skipped lines: %v", err)
	}
}

// The P100 of ghw's capture has this modalias; the kernel prints it with
// %08X, so hex is upper case.
const p100 = "pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02i00"

func TestMatchAlias(t *testing.T) {
	for _, c := range []struct {
		pat, s string
		want   bool
	}{
		{"pci:v000010DEd*sv*sd*bc03sc02i00*", p100, true},
		{"pci:v000010DEd*sv*sd*bc03sc00i00*", p100, false},
		{"pci:v000010DEd*sv*sd*bc03sc*i*", p100, true},
		{"pci:v00001002d0000740Fsv*sd*bc*sc*i*", p100, false},
		{"pci:v000010DEd000015F8sv000010DEsd0000118Fbc03sc02i00", p100, true},
		{"pci:v000010DEd000015F?sv*", p100, true},
		{"pci:v000010DEd000015F[0-9A-F]sv*", p100, true},
		{"pci:v000010DEd000015F[!8]sv*", p100, false},
		{"pci:v000010DEd000015F[^0-7]sv*", p100, true},
		{"pci:v000010DEd000015F[8sv*", p100, false}, // "[" without "]" is itself
		{"a[b", "a[b", true},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"*", "", true},
		{"", "", true},
		{"", "x", false},
		{"**a**", "ba", true},
		{"pci:*", "usb:x", false},
		{"[]a]", "]", true},
	} {
		if got := MatchAlias(c.pat, c.s); got != c.want {
			t.Errorf("MatchAlias(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
	// Many stars against a long string that does not match: linear
	// restarts, not an exponential search.
	pat := strings.Repeat("*a", 200) + "b"
	if MatchAlias(pat, strings.Repeat("a", 5000)) {
		t.Error("matched")
	}
}

func TestParseModulesDepAndBuiltin(t *testing.T) {
	dep := "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst: kernel/drivers/gpu/drm/drm_exec.ko.zst kernel/drivers/gpu/drm/amd/amdxcp/amdxcp.ko.zst\n" +
		"updates/dkms/nvidia.ko:\n" +
		"kernel/drivers/accel/habanalabs/habanalabs.ko.xz: kernel/drivers/accel/drm_accel.ko.xz\n" +
		"kernel/drivers/net/ethernet/intel/ice/ice.ko.gz:\n" +
		"not a dep line\n"
	got, err := ParseModulesDep([]byte(dep), "modules.dep")
	var sk *SkippedLinesError
	if !errors.As(err, &sk) || sk.First != 5 {
		t.Errorf("error %v, want line 5 skipped", err)
	}
	want := map[string]DepEntry{
		"amdgpu":     {"kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst", 1},
		"nvidia":     {"updates/dkms/nvidia.ko", 2},
		"habanalabs": {"kernel/drivers/accel/habanalabs/habanalabs.ko.xz", 3},
		"ice":        {"kernel/drivers/net/ethernet/intel/ice/ice.ko.gz", 4},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	b, err := ParseModulesBuiltin([]byte("kernel/drivers/gpu/drm/i915/i915.ko\nkernel/drivers/pci/pcieportdrv.ko\nkernel/drivers/video/fbdev/core/fb-sys-fops.ko\n"), "modules.builtin")
	if err != nil || b["i915"] != 1 || b["pcieportdrv"] != 2 || b["fb_sys_fops"] != 3 {
		t.Errorf("builtin %v, %v", b, err)
	}
}

func TestParseModprobeConf(t *testing.T) {
	conf := "# nvidia-installer: disable nouveau\nblacklist nouveau\noptions nouveau modeset=0\n" +
		"install amdgpu /bin/false\n" +
		"install nvidia modprobe -i nvidia-current $CMDLINE_OPTS\n" +
		"blacklist \\\n  habanalabs\n" +
		"  # an indented comment blacklist xe\n" +
		"softdep amdgpu pre: amdxcp\n" +
		"install in /bin/true\n" +
		"bogus command here\n" +
		"blacklist intel-vpu"
	got := ParseModprobeConf([]byte(conf), "/etc/modprobe.d/x.conf")
	want := []ModprobeRule{
		{Kind: RuleBlacklist, Module: "nouveau", File: "/etc/modprobe.d/x.conf", Line: 2, Text: "blacklist nouveau"},
		{Kind: RuleInstall, Module: "amdgpu", Command: "/bin/false", File: "/etc/modprobe.d/x.conf", Line: 4, Text: "install amdgpu /bin/false"},
		{Kind: RuleInstall, Module: "nvidia", Command: "modprobe -i nvidia-current $CMDLINE_OPTS", File: "/etc/modprobe.d/x.conf", Line: 5, Text: "install nvidia modprobe -i nvidia-current $CMDLINE_OPTS"},
		{Kind: RuleBlacklist, Module: "habanalabs", File: "/etc/modprobe.d/x.conf", Line: 6, Text: "blacklist    habanalabs"},
		{Kind: RuleInstall, Module: "in", Command: "/bin/true", File: "/etc/modprobe.d/x.conf", Line: 10, Text: "install in /bin/true"},
		{Kind: RuleBlacklist, Module: "intel_vpu", File: "/etc/modprobe.d/x.conf", Line: 12, Text: "blacklist intel-vpu"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	refuses := map[string]bool{"nouveau": true, "amdgpu": true, "nvidia": false, "habanalabs": true, "in": true, "intel_vpu": true}
	for _, r := range got {
		if r.Refuses() != refuses[r.Module] {
			t.Errorf("%s: Refuses %v", r.Text, r.Refuses())
		}
	}
}

func TestParseCmdline(t *testing.T) {
	got := ParseCmdline(`BOOT_IMAGE=/vmlinuz root=UUID=x ro quiet nomodeset modprobe.blacklist=nouveau,amdgpu amdgpu.modeset=1 dyndbg="file drm* +p" module-blacklist=xe -- nomodeset single` + "\n")
	var names []string
	for _, p := range got {
		names = append(names, p.Name+"="+p.Value)
	}
	want := []string{"BOOT_IMAGE=/vmlinuz", "root=UUID=x", "ro=", "quiet=", "nomodeset=", "modprobe.blacklist=nouveau,amdgpu", "amdgpu.modeset=1", "dyndbg=file drm* +p", "module_blacklist=xe"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got[7].Raw != `dyndbg="file drm* +p"` {
		t.Errorf("raw %q", got[7].Raw)
	}
}

func TestParseLockdown(t *testing.T) {
	for in, want := range map[string]string{
		"none [integrity] confidentiality\n": "integrity",
		"[none] integrity confidentiality\n": "none",
		"none integrity [confidentiality]\n": "confidentiality",
	} {
		if got, err := ParseLockdown([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "none integrity", "[bogus]", "[none] [integrity]", "]["} {
		if got, err := ParseLockdown([]byte(in)); err == nil {
			t.Errorf("%q: %q, no error", in, got)
		}
	}
}

func TestKeepProbeLines(t *testing.T) {
	log := "a secret line\nnvidia 0000:17:00.0: probe with driver nvidia failed with error -1\nuser=alice\nNVRM: GPU 0000:17:00.0: x\nlast"
	got := string(KeepProbeLines([]byte(log)))
	want := "\nnvidia 0000:17:00.0: probe with driver nvidia failed with error -1\n\nNVRM: GPU 0000:17:00.0: x\n\n"
	if got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if a, b := FindProbeLines([]byte(log), "f", "0000:17:00.0", "nvidia", 3), FindProbeLines([]byte(got), "f", "0000:17:00.0", "nvidia", 3); !cmp.Equal(a, b) {
		t.Errorf("the kept lines read differently: %+v, %+v", a, b)
	}
}

func TestFindProbeLines(t *testing.T) {
	log := "Mar  5 10:00:01 node kernel: [    5.1] amdgpu 0000:03:00.0: amdgpu: Fetched VBIOS from ROM BAR\n" +
		"Mar  5 10:00:01 node kernel: [    5.2] amdgpu 0000:03:00.0: Direct firmware load for amdgpu/aldebaran_sos.bin failed with error -2\n" +
		"Mar  5 10:00:01 node kernel: [    5.3] amdgpu 0000:03:00.0: probe with driver amdgpu failed with error -2\n" +
		"[    6.0] amdgpu: probe of 0000:03:00.0 failed with error -22\n" +
		"[    6.1] amdgpu 0000:c3:00.0: probe with driver amdgpu failed with error -5\n" +
		"[    7.0] NVRM: GPU 0000:17:00.0: RmInitAdapter failed! (0x26:0x56:1474)\n" +
		"[    7.1] nvidia 0000:17:00.0: probe with driver nvidia failed with error -1\n"
	got := FindProbeLines([]byte(log), "/var/log/kern.log", "0000:03:00.0", "amdgpu", 3)
	if len(got) != 2 || got[0].Line != 3 || got[0].Error != "-2" || got[1].Line != 4 || got[1].Error != "-22" {
		t.Errorf("amdgpu: %+v", got)
	}
	got = FindProbeLines([]byte(log), "/var/log/kern.log", "0000:17:00.0", "nvidia", 3)
	if len(got) != 2 || got[0].Error != "" || !strings.Contains(got[0].Text, "RmInitAdapter") || got[1].Error != "-1" {
		t.Errorf("nvidia: %+v", got)
	}
	if got := FindProbeLines([]byte(log), "f", "0000:99:00.0", "amdgpu", 3); got != nil {
		t.Errorf("other device: %+v", got)
	}
	// Only the latest keep of each kind are kept.
	many := strings.Repeat("amdgpu 0000:03:00.0: probe with driver amdgpu failed with error -19\n", 50)
	if got := FindProbeLines([]byte(many), "f", "0000:03:00.0", "amdgpu", 3); len(got) != 3 || got[2].Line != 50 {
		t.Errorf("many: %d, last %+v", len(got), got[len(got)-1])
	}
}

// kmodTree is a host with an unbound MI210 and the module files of one
// kernel.
func kmodTree(t *testing.T, change func(files, links map[string]string)) *hostfs.Root {
	t.Helper()
	const rel = "6.8.0-45-generic"
	mods := "/lib/modules/" + rel + "/"
	files := map[string]string{
		OSReleasePath:            rel + "\n",
		CmdlinePath:              "BOOT_IMAGE=/vmlinuz-" + rel + " root=/dev/sda1 ro quiet\n",
		LockdownPath:             "[none] integrity confidentiality\n",
		SigEnforcePath:           "N\n",
		mods + "modules.alias":   testAliases,
		mods + "modules.builtin": "kernel/drivers/pci/pcieportdrv.ko\n",
		mods + "modules.dep":     "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko: kernel/drivers/gpu/drm/drm_exec.ko\n",
		mods + "kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko": "\x7fELF...",
		"/etc/modprobe.d/nvidia.conf":                        "blacklist nouveau\n",
		"/lib/modprobe.d/systemd.conf":                       "options bonding max_bonds=0\n",
	}
	links := map[string]string{}
	if change != nil {
		change(files, links)
	}
	return hostfs.MustNew(tree(t, files, links))
}

func TestReadKernelModules(t *testing.T) {
	k := ReadKernelModules(kmodTree(t, nil))
	if k.Release != "6.8.0-45-generic" || k.Dir != "/lib/modules/6.8.0-45-generic" {
		t.Fatalf("release %q dir %q (%v, %v)", k.Release, k.Dir, k.ReleaseRead.Err, k.DirRead.Err)
	}
	for _, r := range []Read{k.AliasRead, k.DepRead, k.BuiltinRead, k.CmdlineRead, k.LockdownRead, k.SigEnforceRead} {
		if r.Err != nil {
			t.Errorf("%s: %v", r.Path, r.Err)
		}
	}
	if !errors.Is(k.BuiltinAliasRead.Err, os.ErrNotExist) {
		t.Errorf("modules.builtin.alias: %v", k.BuiltinAliasRead.Err)
	}
	ma := "pci:v00001002d0000740Fsv00001002sd00000C34bc03sc80i00"
	if m := k.Match(ma); len(m) != 1 || m[0].Module != "amdgpu" || m[0].Line != 4 {
		t.Errorf("match %+v", m)
	}
	if f := k.File(kmodTree(t, nil), "amdgpu"); !f.InDep || !f.Exists || f.StatErr != nil {
		t.Errorf("installed: %+v", f)
	}
	gone := kmodTree(t, func(files, _ map[string]string) {
		delete(files, "/lib/modules/6.8.0-45-generic/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko")
		files["/lib/modules/6.8.0-45-generic/kernel/drivers/gpu/drm/amd/amdgpu/other"] = ""
	})
	if f := k.File(gone, "amdgpu"); !f.InDep || f.Exists || f.StatErr != nil {
		t.Errorf("file removed: %+v", f)
	}
	if f := k.File(hostfs.MustNew(t.TempDir()), "amdgpu"); f.Exists || f.StatErr == nil {
		t.Errorf("a root that cannot show the file: %+v", f)
	}
	if req, known, _, why := k.Enforcement(); req || !known {
		t.Errorf("enforcement %v %v %s", req, known, why)
	}
	if r := k.Refusals("nouveau"); len(r) != 1 || r[0].Where() != "/etc/modprobe.d/nvidia.conf line 1" {
		t.Errorf("refusals of nouveau: %+v", r)
	}
	if r := k.Refusals("amdgpu"); len(r) != 0 {
		t.Errorf("refusals of amdgpu: %+v", r)
	}
}

// kmod reads the first directory's file of a name, and only *.conf;
// what cannot be read is said, never fatal.
func TestModprobeDirs(t *testing.T) {
	k := ReadKernelModules(kmodTree(t, func(files, links map[string]string) {
		files["/lib/modprobe.d/local.conf"] = "blacklist amdgpu\n"
		files["/etc/modprobe.d/local.conf"] = "# amdgpu allowed here\n"
		files["/usr/lib/modprobe.d/amd.conf"] = "install amdgpu /bin/true\n"
		files["/etc/modprobe.d/amdgpu.conf.dpkg-old"] = "blacklist amdgpu\n"
		links["/run/modprobe.d"] = "modprobe.d" // a loop
		links["/etc/modprobe.d/dangling.conf"] = "/nowhere.conf"
		links["/etc/modprobe.d/loop.conf"] = "loop.conf"
	}))
	r := k.Refusals("amdgpu")
	if len(r) != 1 || r[0].Rule.File != "/usr/lib/modprobe.d/amd.conf" || r[0].Rule.Kind != RuleInstall {
		t.Errorf("refusals %+v", r)
	}
	var errs []string
	for _, err := range k.ModprobeErrs {
		errs = append(errs, err.Error())
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "/run/modprobe.d") || !strings.Contains(errs[1], "loop.conf") {
		t.Errorf("errors %q", errs)
	}
}

// What cannot be read is each file's Read error; nothing panics.
func TestReadKernelModulesUnreadable(t *testing.T) {
	rel := "/lib/modules/6.8.0-45-generic/"
	for _, c := range []struct {
		name   string
		change func(files, links map[string]string)
		check  func(k *KernelModules) bool
	}{
		{"no release", func(f, l map[string]string) { delete(f, OSReleasePath) }, func(k *KernelModules) bool {
			return k.Release == "" && k.Dir == "" && errors.Is(k.AliasRead.Err, ErrNoRelease) && errors.Is(k.ReleaseRead.Err, os.ErrNotExist)
		}},
		{"release is a path", func(f, l map[string]string) { f[OSReleasePath] = "../../etc\n" }, func(k *KernelModules) bool {
			return k.Release == "" && k.ReleaseRead.Err != nil
		}},
		{"no modules directory", func(f, l map[string]string) {
			for p := range f {
				if strings.HasPrefix(p, rel) {
					delete(f, p)
				}
			}
		}, func(k *KernelModules) bool {
			return k.Dir == "" && errors.Is(k.DirRead.Err, os.ErrNotExist) && k.AliasRead.Err != nil
		}},
		{"modules.alias garbage", func(f, l map[string]string) { f[rel+"modules.alias"] = "\x00\x01\x02 binary\n\xff\xfe" }, func(k *KernelModules) bool {
			return k.AliasRead.Err != nil && len(k.Aliases) == 0
		}},
		{"modules.alias a loop", func(f, l map[string]string) { delete(f, rel+"modules.alias"); l[rel+"modules.alias"] = "modules.alias" }, func(k *KernelModules) bool {
			return k.AliasRead.Err != nil
		}},
		{"cmdline absent", func(f, l map[string]string) { delete(f, CmdlinePath) }, func(k *KernelModules) bool {
			return errors.Is(k.CmdlineRead.Err, os.ErrNotExist) && len(k.Cmdline) == 0
		}},
		{"lockdown garbage", func(f, l map[string]string) { f[LockdownPath] = "[everything]\n"; f[SigEnforcePath] = "maybe\n" }, func(k *KernelModules) bool {
			_, known, _, _ := k.Enforcement()
			return k.Lockdown == "" && k.LockdownRead.Err != nil && k.SigEnforceRead.Err != nil && !known
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := ReadKernelModules(kmodTree(t, c.change))
			if !c.check(k) {
				t.Errorf("%+v", k)
			}
		})
	}
}

// A modules.alias over the read limit is refused before it is read (a
// sparse file: no disk is spent).
func TestModulesAliasTooLarge(t *testing.T) {
	dir := tree(t, map[string]string{OSReleasePath: "6.8.0\n", "/lib/modules/6.8.0/modules.dep": ""}, nil)
	p := filepath.Join(dir, "lib/modules/6.8.0/modules.alias")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(ModulesFileLimit + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	k := ReadKernelModules(hostfs.MustNew(dir))
	if !errors.Is(k.AliasRead.Err, hostfs.ErrTooLarge) {
		t.Errorf("modules.alias: %v", k.AliasRead.Err)
	}
}

func TestReadModuleSignature(t *testing.T) {
	gz := func(s string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.String()
	}
	signed := "\x7fELF" + strings.Repeat("x", 100000) + "sig" + ModuleSigMarker
	root := hostfs.MustNew(tree(t, map[string]string{
		"/m/signed.ko":      signed,
		"/m/unsigned.ko":    "\x7fELF" + strings.Repeat("x", 1000),
		"/m/signed.ko.gz":   gz(signed),
		"/m/unsigned.ko.gz": gz("\x7fELF unsigned"),
		"/m/bad.ko.gz":      "not gzip",
		"/m/a.ko.zst":       "(zstd)",
		"/m/a.ko.xz":        "(xz)",
		"/m/tiny.ko":        "",
	}, nil))
	for p, want := range map[string]bool{"/m/signed.ko": true, "/m/unsigned.ko": false, "/m/signed.ko.gz": true, "/m/unsigned.ko.gz": false, "/m/tiny.ko": false} {
		if got, err := ReadModuleSignature(root, p); err != nil || got != want {
			t.Errorf("%s: %v, %v", p, got, err)
		}
	}
	for _, p := range []string{"/m/a.ko.zst", "/m/a.ko.xz"} {
		if _, err := ReadModuleSignature(root, p); !errors.Is(err, ErrCompressed) {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"/m/bad.ko.gz", "/m/absent.ko", "/m/x.txt"} {
		if _, err := ReadModuleSignature(root, p); err == nil {
			t.Errorf("%s: no error", p)
		}
	}
}

// Every modalias of the corpus' real sysfs trees is what FormatModalias
// writes for its ids, and the P100's matches nvidia's and nouveau's
// aliases, not amdgpu's.
func TestModaliasOfRealCaptures(t *testing.T) {
	dir := testutil.CorpusDir(t)
	archives, _ := filepath.Glob(filepath.Join(dir, "ghw", "*.tar.gz"))
	more, _ := filepath.Glob(filepath.Join(dir, "hwloc", "linux", "*.tar.bz2"))
	archives = append(archives, more...)
	aliases, err := ParseModulesAlias([]byte(testAliases), "modules.alias", "pci:")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sawP100 := false
	for _, a := range archives {
		tr := testutil.Unpack(t, a)
		if tr == "" {
			continue
		}
		paths, _ := filepath.Glob(filepath.Join(tr, "sys/bus/pci/devices/*"))
		root := hostfs.MustNew(tr)
		for _, p := range paths {
			sys, err := root.Resolve("/sys/bus/pci/devices/" + filepath.Base(p))
			if err != nil {
				continue
			}
			ma, err := ReadModalias(root, sys)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Errorf("%s %s: %v", filepath.Base(a), sys, err)
				continue
			}
			n++
			// Older kernels printed the programming interface in lower
			// case ("i%02x"); the rest is upper case.
			m, _ := pci.ParseModalias(ma)
			if got := FormatModalias(m); !strings.EqualFold(got, ma) || got[:len(got)-2] != ma[:len(ma)-2] {
				t.Errorf("%s: FormatModalias %q, the kernel wrote %q", sys, got, ma)
			}
			if ma == p100 {
				sawP100 = true
				var mods []string
				for _, al := range aliases {
					if MatchAlias(al.Pattern, ma) {
						mods = append(mods, al.Module)
					}
				}
				if d := cmp.Diff([]string{"nouveau", "nvidia"}, mods); d != "" {
					t.Errorf("P100 matches (-want +got):\n%s", d)
				}
			}
		}
	}
	if n < 50 || !sawP100 {
		t.Errorf("%d modalias files read, P100 seen %v", n, sawP100)
	}
}

// A snapshot replays the module facts: /proc/cmdline never travels, the
// parameters that govern loading do; a kernel log travels with only its
// probe and NVRM lines, at their line numbers.
func TestKernelModulesSnapshot(t *testing.T) {
	root := kmodTree(t, func(files, _ map[string]string) {
		files[CmdlinePath] = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro nomodeset amdgpu.modeset=0 modprobe.blacklist=nouveau secret_token=hunter2 -- module_blacklist=x\n"
		files["/etc/modprobe.d/x.conf"] = "blacklist amdgpu\n"
		files["/var/log/kern.log"] = "host=alpha user=alice\namdgpu 0000:03:00.0: probe with driver amdgpu failed with error -2\n"
	})
	rec := root.Record()
	want := ReadKernelModules(root)
	ReadKernelLog(root, "/var/log/kern.log")
	var buf bytes.Buffer
	if _, err := root.WriteSnapshot(rec, &buf, "test"); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if _, err := os.Stat(filepath.Join(snap.Dir(), "proc/cmdline")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot holds /proc/cmdline: %v", err)
	}
	got := ReadKernelModules(snap)
	var params []string
	for _, p := range got.Cmdline {
		params = append(params, p.Raw)
	}
	if d := cmp.Diff([]string{"nomodeset", "amdgpu.modeset=0", "modprobe.blacklist=nouveau"}, params); d != "" || got.CmdlineRead.Err != nil {
		t.Errorf("replayed command line (-want +got):\n%s%v", d, got.CmdlineRead.Err)
	}
	if len(got.Aliases) != len(want.Aliases) || len(got.Refusals("amdgpu")) != 1 || got.Release != want.Release || len(got.Dep) != len(want.Dep) {
		t.Errorf("replay: %+v", got)
	}
	b, err := ReadKernelLog(snap, "/var/log/kern.log")
	if err != nil || string(b) != "\namdgpu 0000:03:00.0: probe with driver amdgpu failed with error -2\n" {
		t.Errorf("replayed log %q, %v", b, err)
	}
}

// A distribution kernel's modules.alias has some 30 000 lines, a third of
// them PCI aliases: the cost of judging a device no driver is bound to.
func BenchmarkMatchModalias(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("# Aliases extracted from modules themselves.\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&sb, "alias pci:v00001002d%08Xsv*sd*bc*sc*i* amdgpu\n", i)
		fmt.Fprintf(&sb, "alias usb:v%04Xp*d*dc*dsc*dp*ic*isc*ip*in* usbmod%d\n", i, i%300)
		fmt.Fprintf(&sb, "alias of:N*T*Cvendor,dev%d* ofmod%d\n", i, i%200)
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		as, err := ParseModulesAlias(data, "modules.alias", "pci:")
		if err != nil || len(as) != 10000 {
			b.Fatal(len(as), err)
		}
		k := KernelModules{Aliases: as}
		if m := k.Match("pci:v00001002d0000070Fsv00001002sd00000C34bc03sc80i00"); len(m) != 1 {
			b.Fatal(m)
		}
	}
}
