package driver

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// What a host says about the kernel modules that could drive a device no
// driver is bound to: which module's aliases match the device, whether
// that module is installed for the running kernel, loaded, built in,
// refused by modprobe.d or the command line, unsigned where the kernel
// wants signatures, and what the kernel log said when its probe failed.
// Everything is read through the root; nothing is loaded or probed.

// Paths read for the module facts.
const (
	// OSReleasePath is the running kernel's release, the name of its
	// modules' directory (kernel/utsname_sysctl.c).
	OSReleasePath = "/proc/sys/kernel/osrelease"
	// CmdlinePath is the running kernel's command line.
	CmdlinePath = "/proc/cmdline"
	// LockdownPath is the lockdown LSM's state (security/lockdown/lockdown.c).
	LockdownPath = "/sys/kernel/security/lockdown"
	// SigEnforcePath is module.sig_enforce, Y when the kernel loads only
	// signed modules (kernel/module/signing.c).
	SigEnforcePath = "/sys/module/module/parameters/sig_enforce"
)

// ModulesDirs hold one directory per installed kernel release; /lib is a
// link to /usr/lib on merged-/usr systems, and some keep only the latter.
var ModulesDirs = []string{"/lib/modules", "/usr/lib/modules"}

// ModprobeDirs are the directories kmod reads modprobe configuration
// from, in its order (libkmod/libkmod.c, default_config_paths); a file
// name found in an earlier one hides the same name in the later ones.
var ModprobeDirs = []string{"/etc/modprobe.d", "/run/modprobe.d", "/usr/local/lib/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d"}

// KernelLogPaths are the kernel log files a host or capture may keep: the
// boot log some distributions write (/var/log/dmesg) and syslog's files.
// /dev/kmsg itself is a device no capture holds and no reader opens.
var KernelLogPaths = []string{"/var/log/dmesg", "/var/log/kern.log", "/var/log/messages", "/var/log/syslog"}

// Read limits. A distribution kernel's modules.alias is 1-2 MB and its
// modules.dep under 1 MB; a kernel log may be large, and only its first
// 16 MiB are ever captured by a snapshot.
const (
	ModulesFileLimit = 32 << 20
	KernelLogLimit   = 16 << 20
	modprobeLimit    = 1 << 20
	// moduleFileLimit bounds the module files whose trailer is read
	// (nvidia.ko is some 100 MB); the file is mapped, and only its last
	// page is touched.
	moduleFileLimit = 1 << 30
	// gzipLimit bounds what a .ko.gz may decompress to.
	gzipLimit = 1 << 30
)

// ErrNoRelease: the kernel release names the directory of its modules;
// without it nothing can be said of what is installed (the Read of every
// file of that directory wraps it).
var ErrNoRelease = errors.New("the running kernel's release is not known")

// Read is the outcome of reading one file: its host path, and why it was
// not read or only in part (nil: read and understood whole).
type Read struct {
	Path string
	Err  error
}

// KernelModules is what the root says about the running kernel's modules
// and what governs their loading. Each file's Read says how it went.
type KernelModules struct {
	Release     string // "6.8.0-45-generic"; "" when not known
	ReleaseRead Read
	// Dir is the release's module directory (/lib/modules/<release>);
	// "" without a release, or when no such directory is there (DirRead
	// says which).
	Dir     string
	DirRead Read

	Aliases   []Alias // PCI aliases of loadable modules (modules.alias)
	AliasRead Read
	// BuiltinAliases are the PCI aliases of built-in modules
	// (modules.builtin.alias, written by kmod's depmod since v27);
	// BuiltinAliasRead.Err is fs.ErrNotExist where depmod wrote none.
	BuiltinAliases   []Alias
	BuiltinAliasRead Read
	Dep              map[string]DepEntry // by module name (modules.dep)
	DepRead          Read
	Builtin          map[string]int // module name -> line (modules.builtin)
	BuiltinRead      Read

	// Modprobe are the blacklist and install commands of every
	// modprobe.d file kmod reads, in its order; ModprobeFiles the files
	// read, ModprobeErrs the directories and files that could not be.
	Modprobe      []ModprobeRule
	ModprobeFiles []string
	ModprobeErrs  []error

	Cmdline     []Param
	CmdlineRead Read

	Lockdown       string // "none", "integrity", "confidentiality"; "" when not known
	LockdownRead   Read
	SigEnforce     *bool
	SigEnforceRead Read
}

// ReadKernelModules reads the module facts of the running kernel.
// Nothing is an error of the whole: each file's Read says what it gave.
func ReadKernelModules(root *hostfs.Root) *KernelModules {
	k := &KernelModules{}
	k.readRelease(root)
	k.readModulesDir(root)
	k.readModprobe(root)
	k.Cmdline, k.CmdlineRead = readCmdline(root)
	if b, err := root.ReadFileLimit(LockdownPath, 4096); err != nil {
		k.LockdownRead = Read{LockdownPath, err}
	} else {
		k.Lockdown, err = ParseLockdown(b)
		k.LockdownRead = Read{LockdownPath, err}
	}
	k.SigEnforceRead.Path = SigEnforcePath
	if s, err := root.ReadString(SigEnforcePath); err != nil {
		k.SigEnforceRead.Err = err
	} else if s == "Y" || s == "N" {
		v := s == "Y"
		k.SigEnforce = &v
	} else {
		k.SigEnforceRead.Err = fmt.Errorf("%s: %q is not Y or N", SigEnforcePath, short(s))
	}
	return k
}

func (k *KernelModules) readRelease(root *hostfs.Root) {
	k.ReleaseRead.Path = OSReleasePath
	s, err := root.ReadString(OSReleasePath)
	switch {
	case err != nil:
		k.ReleaseRead.Err = err
	case !validModuleName(s) || len(s) > 64: // __NEW_UTS_LEN, include/uapi/linux/utsname.h
		k.ReleaseRead.Err = fmt.Errorf("%s: %q is not a kernel release", OSReleasePath, short(s))
	default:
		k.Release = s
	}
}

func (k *KernelModules) readModulesDir(root *hostfs.Root) {
	if k.Release == "" {
		err := fmt.Errorf("%w (%v)", ErrNoRelease, k.ReleaseRead.Err)
		k.DirRead = Read{path.Join(ModulesDirs[0], "<release>"), err}
		k.AliasRead, k.DepRead, k.BuiltinRead, k.BuiltinAliasRead = k.DirRead, k.DirRead, k.DirRead, k.DirRead
		return
	}
	k.DirRead.Path = path.Join(ModulesDirs[0], k.Release)
	for _, d := range ModulesDirs {
		p := path.Join(d, k.Release)
		st, err := root.Stat(p)
		if err == nil && st.Type == hostfs.TypeDir {
			k.Dir, k.DirRead = p, Read{Path: p}
			break
		}
		if err == nil {
			err = fmt.Errorf("%s is a %s, not a directory", p, st.Type)
		}
		if d == ModulesDirs[0] {
			k.DirRead.Err = err
		}
	}
	if k.Dir == "" {
		k.AliasRead, k.DepRead, k.BuiltinRead, k.BuiltinAliasRead = k.DirRead, k.DirRead, k.DirRead, k.DirRead
		return
	}
	read := func(name string) ([]byte, Read) {
		p := path.Join(k.Dir, name)
		b, err := root.ReadFileLimit(p, ModulesFileLimit)
		return b, Read{p, err}
	}
	if b, r := read("modules.alias"); r.Err != nil {
		k.AliasRead = r
	} else {
		k.Aliases, r.Err = ParseModulesAlias(b, r.Path, "pci:")
		k.AliasRead = r
	}
	if b, r := read("modules.builtin.alias"); r.Err != nil {
		k.BuiltinAliasRead = r
	} else {
		k.BuiltinAliases, r.Err = ParseModulesAlias(b, r.Path, "pci:")
		if r.Err != nil && len(b) == 0 {
			r.Err = nil // a kernel with no built-in module that has an alias
		}
		k.BuiltinAliasRead = r
	}
	if b, r := read("modules.dep"); r.Err != nil {
		k.DepRead = r
	} else {
		k.Dep, r.Err = ParseModulesDep(b, r.Path)
		k.DepRead = r
	}
	if b, r := read("modules.builtin"); r.Err != nil {
		k.BuiltinRead = r
	} else {
		k.Builtin, r.Err = ParseModulesBuiltin(b, r.Path)
		k.BuiltinRead = r
	}
}

// readModprobe reads every *.conf of ModprobeDirs as kmod does
// (libkmod-config.c, conf_files_list: only names ending in ".conf", sorted
// by name across the directories, the first directory's file winning).
func (k *KernelModules) readModprobe(root *hostfs.Root) {
	chosen := map[string]string{}
	for _, d := range ModprobeDirs {
		names, err := root.ReadDir(d)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				k.ModprobeErrs = append(k.ModprobeErrs, fmt.Errorf("list %s: %w", d, err))
			}
			continue
		}
		for _, n := range names {
			if !strings.HasSuffix(n, ".conf") || strings.HasPrefix(n, ".") {
				continue
			}
			if _, ok := chosen[n]; !ok {
				chosen[n] = path.Join(d, n)
			}
		}
	}
	names := make([]string, 0, len(chosen))
	for n := range chosen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := chosen[n]
		b, err := root.ReadFileLimit(p, modprobeLimit)
		if err != nil {
			if _, lerr := root.Lstat(p); errors.Is(err, fs.ErrNotExist) && lerr == nil {
				continue // a dangling link: kmod skips what it cannot open
			}
			k.ModprobeErrs = append(k.ModprobeErrs, err)
			continue
		}
		k.ModprobeFiles = append(k.ModprobeFiles, p)
		k.Modprobe = append(k.Modprobe, ParseModprobeConf(b, p)...)
	}
}

// cmdlineCapture is the name under which a snapshot keeps the command
// line's parameters that govern module loading (hostfs.Root.Capture):
// /proc/cmdline itself never travels in a snapshot, as it may hold
// secrets, but these do not.
const cmdlineCapture = "kmod-cmdline"

// moduleParam: a parameter that decides whether a module loads.
func moduleParam(p Param) bool {
	switch {
	case p.Name == "nomodeset", p.Name == "module_blacklist", p.Name == "modprobe.blacklist":
		return true
	}
	return strings.HasSuffix(p.Name, ".modeset")
}

func readCmdline(root *hostfs.Root) ([]Param, Read) {
	b, err := root.ReadFileLimit(CmdlinePath, 64<<10)
	if err != nil {
		if c, ok := root.Captured(cmdlineCapture); ok && errors.Is(err, fs.ErrNotExist) {
			return ParseCmdline(string(c)), Read{Path: CmdlinePath}
		}
		return nil, Read{CmdlinePath, err}
	}
	params := ParseCmdline(string(b))
	var keep []string
	for _, p := range params {
		if moduleParam(p) {
			keep = append(keep, p.Raw)
		}
	}
	root.Capture(cmdlineCapture, []byte(strings.Join(keep, " ")+"\n"))
	return params, Read{Path: CmdlinePath}
}

// Match returns the aliases, loadable then built in, whose pattern
// matches modalias.
func (k *KernelModules) Match(modalias string) []Alias {
	var out []Alias
	for _, set := range [][]Alias{k.Aliases, k.BuiltinAliases} {
		for _, a := range set {
			if MatchAlias(a.Pattern, modalias) {
				out = append(out, a)
			}
		}
	}
	return out
}

// ModuleFile is where a module is installed for the running kernel.
type ModuleFile struct {
	Name string
	// Dep is its modules.dep line, when InDep.
	Dep   DepEntry
	InDep bool
	// Path is the host path of the file modules.dep names; Exists
	// whether it is there, StatErr why that could not be told.
	Path    string
	Exists  bool
	StatErr error
	// BuiltinLine is its line in modules.builtin, 0 when not built in.
	BuiltinLine int
}

// File finds a module's file by modules.dep, and whether it is built in
// by modules.builtin.
func (k *KernelModules) File(root *hostfs.Root, name string) ModuleFile {
	name = NormalizeModule(name)
	f := ModuleFile{Name: name, BuiltinLine: k.Builtin[name]}
	e, ok := k.Dep[name]
	if !ok || k.Dir == "" {
		return f
	}
	f.Dep, f.InDep = e, true
	f.Path = e.Path
	if !path.IsAbs(f.Path) {
		f.Path = path.Join(k.Dir, f.Path)
	}
	st, err := root.Stat(f.Path)
	switch {
	case err == nil && st.Type == hostfs.TypeRegular:
		f.Exists = true
	case err == nil:
		f.StatErr = fmt.Errorf("%s is a %s, not a module file", f.Path, st.Type)
	case errors.Is(err, fs.ErrNotExist) && root.Covers(f.Path):
	default:
		f.StatErr = err
	}
	return f
}

// Refusal is something that keeps a module from loading: a modprobe.d
// command or a kernel command-line parameter.
type Refusal struct {
	// Rule is the modprobe.d command; nil for a parameter.
	Rule *ModprobeRule
	// Param is the command-line parameter; nil for a rule.
	Param *Param
	// Kernel: the kernel itself refuses the module (module_blacklist=),
	// whoever asks for it; otherwise modprobe does.
	Kernel bool
}

// Where says where the refusal is written ("/etc/modprobe.d/x.conf line
// 3", "the kernel command line").
func (r Refusal) Where() string {
	if r.Rule != nil {
		return fmt.Sprintf("%s line %d", r.Rule.File, r.Rule.Line)
	}
	return "the kernel command line (" + CmdlinePath + ")"
}

// Text is the refusal as written.
func (r Refusal) Text() string {
	if r.Rule != nil {
		return r.Rule.Text
	}
	return r.Param.Raw
}

// Refusals lists what keeps module name from loading, most binding first:
// module_blacklist= on the command line (the kernel refuses it,
// kernel/module/main.c, blacklisted()), an install command that does
// nothing (modprobe runs it instead, even for `modprobe NAME`), a
// blacklist command (no loading by alias, so udev does not load it), and
// modprobe.blacklist= (kmod reads it from the command line as a blacklist,
// libkmod-config.c kmod_config_parse_kcmdline).
func (k *KernelModules) Refusals(name string) []Refusal {
	name = NormalizeModule(name)
	var kernel, install, black, kcmd []Refusal
	for i := range k.Cmdline {
		p := &k.Cmdline[i]
		if !p.HasValue || (p.Name != "module_blacklist" && p.Name != "modprobe.blacklist") {
			continue
		}
		for _, m := range strings.Split(p.Value, ",") {
			if NormalizeModule(strings.TrimSpace(m)) != name {
				continue
			}
			if p.Name == "module_blacklist" {
				kernel = append(kernel, Refusal{Param: p, Kernel: true})
			} else {
				kcmd = append(kcmd, Refusal{Param: p})
			}
		}
	}
	for i := range k.Modprobe {
		r := &k.Modprobe[i]
		if r.Module != name || !r.Refuses() {
			continue
		}
		if r.Kind == RuleInstall {
			install = append(install, Refusal{Rule: r})
		} else {
			black = append(black, Refusal{Rule: r})
		}
	}
	return append(append(append(kernel, install...), black...), kcmd...)
}

// Installs are the install commands for a module that do load something
// (a wrapper, another module): noted, not refusals.
func (k *KernelModules) Installs(name string) []ModprobeRule {
	name = NormalizeModule(name)
	var out []ModprobeRule
	for _, r := range k.Modprobe {
		if r.Module == name && r.Kind == RuleInstall && !r.Refuses() {
			out = append(out, r)
		}
	}
	return out
}

// Param returns the last command-line parameter of that name ('-' read
// as '_'; the kernel applies them in order, so the last one stands).
func (k *KernelModules) Param(name string) (Param, bool) {
	name = NormalizeModule(name)
	for i := len(k.Cmdline) - 1; i >= 0; i-- {
		if k.Cmdline[i].Name == name {
			return k.Cmdline[i], true
		}
	}
	return Param{}, false
}

// Enforcement says whether the kernel loads only signed modules, and
// which file says so (src) with what (why): lockdown in integrity or
// confidentiality mode refuses an unsigned module (kernel/module/signing.c,
// module_sig_check asks security_locked_down(LOCKDOWN_MODULE_SIGNATURE)),
// and so does module.sig_enforce=Y. known is false when neither could be
// read.
func (k *KernelModules) Enforcement() (required, known bool, src, why string) {
	switch {
	case k.Lockdown == "integrity" || k.Lockdown == "confidentiality":
		return true, true, LockdownPath, "lockdown [" + k.Lockdown + "]"
	case k.SigEnforce != nil && *k.SigEnforce:
		return true, true, SigEnforcePath, "module.sig_enforce=Y"
	case k.Lockdown == "none" && k.SigEnforce != nil:
		return false, true, LockdownPath, "lockdown [none], module.sig_enforce=N"
	case k.Lockdown == "none":
		return false, false, SigEnforcePath, fmt.Sprintf("lockdown [none]; %v", k.SigEnforceRead.Err)
	case k.SigEnforce != nil:
		return false, false, LockdownPath, fmt.Sprintf("module.sig_enforce=N; %v", k.LockdownRead.Err)
	}
	return false, false, LockdownPath, fmt.Sprintf("%v; %v", k.LockdownRead.Err, k.SigEnforceRead.Err)
}

// ErrCompressed: a module file compressed in a format no decompressor
// here reads (xz, zstd), so its signature cannot be looked at.
var ErrCompressed = errors.New("compressed in a format accel-doctor cannot read")

// ReadModuleSignature says whether the module file at p (a host path)
// carries an appended signature. A plain .ko is mapped and only its last
// bytes read; a .ko.gz is decompressed as a stream (compress/gzip), its
// last bytes kept. .ko.xz and .ko.zst are ErrCompressed. Whether the
// signing key is one the kernel trusts is not told by the file.
func ReadModuleSignature(root *hostfs.Root, p string) (signed bool, err error) {
	var comp string
	switch {
	case strings.HasSuffix(p, ".ko"):
	case strings.HasSuffix(p, ".ko.gz"):
		comp = "gz"
	case strings.HasSuffix(p, ".ko.xz"), strings.HasSuffix(p, ".ko.zst"):
		return false, fmt.Errorf("%s: %w (%s)", p, ErrCompressed, path.Ext(p)[1:])
	default:
		return false, fmt.Errorf("%s is not a module file name", p)
	}
	b, unmap, err := root.MapFile(p, moduleFileLimit)
	if err != nil {
		return false, err
	}
	defer unmap()
	// A file truncated while mapped faults on access: make that a panic
	// and recover it as a read error.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			signed, err = false, fmt.Errorf("read %s: the file changed while it was read (%v)", p, r)
		}
	}()
	if comp == "" {
		return HasModuleSignature(b), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return false, fmt.Errorf("%s: %w", p, err)
	}
	tail, err := lastBytes(io.LimitReader(zr, gzipLimit+1), len(ModuleSigMarker))
	if err != nil {
		return false, fmt.Errorf("%s: %w", p, err)
	}
	return HasModuleSignature(tail), nil
}

// lastBytes reads r to its end and returns its last n bytes.
func lastBytes(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 64<<10)
	tail := make([]byte, 0, 2*n)
	var total int64
	for {
		m, err := r.Read(buf)
		total += int64(m)
		if total > gzipLimit {
			return nil, fmt.Errorf("decompresses to more than %d bytes", gzipLimit)
		}
		if m >= n {
			tail = append(tail[:0], buf[m-n:m]...)
		} else if m > 0 {
			tail = append(tail, buf[:m]...)
			if len(tail) > n {
				tail = tail[len(tail)-n:]
			}
		}
		if err == io.EOF {
			return tail, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// ReadModalias reads a PCI function's modalias attribute (the kernel's
// drivers/pci/pci-sysfs.c, modalias_show) and checks its form.
func ReadModalias(root *hostfs.Root, sysfsDir string) (string, error) {
	p := path.Join(sysfsDir, "modalias")
	s, err := root.ReadString(p)
	if err != nil {
		return "", err
	}
	if _, err := pci.ParseModalias(s); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return s, nil
}

// FormatModalias writes the modalias the kernel gives a PCI function with
// these ids (drivers/pci/pci-sysfs.c, modalias_show), for a capture that
// kept the ids but not the attribute.
func FormatModalias(m pci.Modalias) string {
	return fmt.Sprintf("pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X",
		m.Vendor, m.Device, m.SubsystemVendor, m.SubsystemDevice, uint8(m.Class>>16), uint8(m.Class>>8), uint8(m.Class))
}

// ReadDriverOverride reads a PCI function's driver_override: the one
// driver the kernel lets bind it, "" when none is set (the attribute
// shows "(null)", drivers/pci/pci-sysfs.c driver_override_show).
func ReadDriverOverride(root *hostfs.Root, sysfsDir string) (string, error) {
	s, err := root.ReadString(path.Join(sysfsDir, "driver_override"))
	if err != nil {
		return "", err
	}
	if s == "(null)" {
		return "", nil
	}
	return s, nil
}

// ReadKernelLog reads one kernel log file, bounded by KernelLogLimit. A
// snapshot being recorded keeps only its lines that FindProbeLines may
// want (KeepProbeLines), so that a bug report does not carry the rest of
// the host's log.
func ReadKernelLog(root *hostfs.Root, p string) ([]byte, error) {
	return root.ReadFileRedacted(p, KernelLogLimit, KeepProbeLines)
}

// KeepProbeLines blanks every line of a kernel log that names no probe
// and is not the NVIDIA driver's, keeping the line numbers evidence
// cites.
func KeepProbeLines(b []byte) []byte {
	out := make([]byte, 0, len(b)/8)
	for l := range bytes.Lines(b) {
		if bytes.Contains(l, []byte("probe")) || bytes.Contains(l, []byte("NVRM:")) {
			out = append(out, l...)
			if !bytes.HasSuffix(l, []byte("\n")) {
				out = append(out, '\n')
			}
		} else {
			out = append(out, '\n')
		}
	}
	return out
}
