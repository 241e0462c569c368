package driver

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Parsers of the files that say which module drives a device and what
// keeps it from loading: modules.alias, modules.dep and modules.builtin
// (written by depmod), modprobe.d configuration (read by kmod), the kernel
// command line, the lockdown state, a module file's signature trailer and
// the kernel log's probe errors. They take bytes and touch nothing; lines
// are split without a length limit (the read limit of the file bounds
// them).

// SkippedLinesError says which lines of a file did not have the shape its
// writer gives them; what parsed is returned beside it, and an absence
// among it is not conclusive.
type SkippedLinesError struct {
	File  string
	Count int // lines skipped
	First int // the first of them, 1-based
}

func (e *SkippedLinesError) Error() string {
	return fmt.Sprintf("%s: %d line(s) not understood, the first line %d", e.File, e.Count, e.First)
}

// eachLine calls f with each line of b that is neither blank nor a "#"
// comment, trimmed, with its 1-based number; the lines f refuses (false)
// are counted in a SkippedLinesError of file.
func eachLine(b []byte, file string, f func(n int, line []byte) bool) error {
	n, bad, first := 0, 0, 0
	for l := range bytes.Lines(b) {
		n++
		line := bytes.TrimSpace(l)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if !f(n, line) {
			bad++
			if first == 0 {
				first = n
			}
		}
	}
	if bad > 0 {
		return &SkippedLinesError{File: file, Count: bad, First: first}
	}
	return nil
}

// Alias is one "alias PATTERN MODULE" line of modules.alias or
// modules.builtin.alias.
type Alias struct {
	Pattern string // "pci:v000010DEd*sv*sd*bc03sc00i00*"
	Module  string // the module's name, '-' read as '_'
	Line    int
}

// ParseModulesAlias parses modules.alias (or modules.builtin.alias) and
// keeps the aliases whose pattern starts with prefix ("pci:"). depmod
// writes "alias PATTERN MODULE" lines and "#" comments (kmod
// tools/depmod.c, output_aliases); the patterns of PCI device tables are
// those of the kernel's scripts/mod/file2alias.c (do_pci_entry:
// "pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X" with "*" for a field the
// table leaves open). Other lines are skipped and counted in the error; a
// file with no alias line at all is an error too.
func ParseModulesAlias(b []byte, file, prefix string) ([]Alias, error) {
	var out []Alias
	aliases := 0
	err := eachLine(b, file, func(n int, line []byte) bool {
		// Only the kept aliases become strings: most of a kernel's
		// aliases are of other buses.
		cmd, pat, mod, ok := threeFields(line)
		if !ok || string(cmd) != "alias" || !validModuleName(string(mod)) {
			return false
		}
		aliases++
		if bytes.HasPrefix(pat, []byte(prefix)) {
			out = append(out, Alias{Pattern: string(pat), Module: NormalizeModule(string(mod)), Line: n})
		}
		return true
	})
	if err != nil {
		return out, err
	}
	if aliases == 0 {
		// depmod writes one line per alias of every module: a file
		// without any is not a depmod run's.
		return out, fmt.Errorf("%s: no alias line", file)
	}
	return out, nil
}

// threeFields splits a trimmed line into exactly three space-separated
// words.
func threeFields(line []byte) (a, b, c []byte, ok bool) {
	var f [3][]byte
	i := 0
	for len(line) > 0 {
		j := bytes.IndexAny(line, " \t")
		if j < 0 {
			j = len(line)
		}
		if j > 0 {
			if i == 3 {
				return nil, nil, nil, false
			}
			f[i] = line[:j]
			i++
		}
		line = line[j:]
		if len(line) > 0 {
			line = line[1:]
		}
	}
	return f[0], f[1], f[2], i == 3
}

// NormalizeModule is a module name as kmod compares it: '-' and '_' are
// the same character (libkmod-util.c, modname_normalize).
func NormalizeModule(s string) string { return strings.ReplaceAll(s, "-", "_") }

// validModuleName: a module name is one path element of printable
// characters (KBUILD_MODNAME, at most MODULE_NAME_LEN - 1 = 55 bytes on
// 64-bit kernels; depmod writes what the module says, so allow more).
func validModuleName(s string) bool {
	if s == "" || len(s) > 255 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' {
			return false
		}
	}
	return true
}

// MatchAlias reports whether modalias matches an alias pattern the way
// kmod matches them: fnmatch(3) without flags (libkmod-module.c,
// kmod_module_new_from_lookup via the alias index, which falls back to
// fnmatch for patterns with wildcards). "*" is any run of bytes, "?" one
// byte, "[...]" a set ("!" or "^" first negates it, "a-z" a range), a
// backslash quotes the next byte, and a "[" without its "]" is itself.
// It runs in O(len(pattern) * len(s)): a star only moves the restart
// point forward.
func MatchAlias(pattern, s string) bool {
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			if pattern[p] == '*' {
				starP, starI = p, i
				p++
				continue
			}
			if ok, w := matchOne(pattern[p:], s[i]); ok {
				p += w
				i++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starI++
		i, p = starI, starP+1
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches one token of a pattern (not a star) against c, and
// says how many pattern bytes the token takes.
func matchOne(pat string, c byte) (bool, int) {
	switch pat[0] {
	case '?':
		return true, 1
	case '\\':
		if len(pat) > 1 {
			return pat[1] == c, 2
		}
		return c == '\\', 1
	case '[':
		if ok, w, valid := matchSet(pat, c); valid {
			return ok, w
		}
		return c == '[', 1
	}
	return pat[0] == c, 1
}

// matchSet matches a bracket expression at the start of pat; valid is
// false when it has no closing bracket.
func matchSet(pat string, c byte) (ok bool, width int, valid bool) {
	i := 1
	neg := false
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		neg = true
		i++
	}
	in := false
	for first := true; i < len(pat); first = false {
		if pat[i] == ']' && !first {
			return in != neg, i + 1, true
		}
		lo := pat[i]
		if lo == '\\' && i+1 < len(pat) {
			i++
			lo = pat[i]
		}
		i++
		hi := lo
		if i+1 < len(pat) && pat[i] == '-' && pat[i+1] != ']' {
			hi = pat[i+1]
			if hi == '\\' && i+2 < len(pat) {
				i++
				hi = pat[i+1]
			}
			i += 2
		}
		if lo <= c && c <= hi {
			in = true
		}
	}
	return false, 0, false
}

// DepEntry is a module's line in modules.dep.
type DepEntry struct {
	Path string // as written: relative to /lib/modules/<release>, or absolute
	Line int
}

// moduleExts are the file names depmod gives modules: plain or compressed
// (kmod's KMOD_EXTENSION_UNCOMPRESSED and the compressed ones kmod reads).
var moduleExts = []string{".ko", ".ko.gz", ".ko.xz", ".ko.zst"}

// ModuleFileName is the module name a module file carries in its name
// ("kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.zst" -> "amdgpu"); ok is
// false for a name that is not a module file's.
func ModuleFileName(p string) (string, bool) {
	base := path.Base(p)
	for _, ext := range moduleExts {
		if name, ok := strings.CutSuffix(base, ext); ok && name != "" {
			return NormalizeModule(name), true
		}
	}
	return "", false
}

// ParseModulesDep parses modules.dep: "PATH: DEP DEP..." per module (kmod
// tools/depmod.c, output_deps), keyed by the module's name.
func ParseModulesDep(b []byte, file string) (map[string]DepEntry, error) {
	out := map[string]DepEntry{}
	err := eachLine(b, file, func(n int, l []byte) bool {
		p, _, ok := strings.Cut(string(l), ":")
		name, isMod := ModuleFileName(p)
		if !ok || !isMod || strings.ContainsAny(p, " \t") {
			return false
		}
		if _, dup := out[name]; !dup {
			out[name] = DepEntry{Path: p, Line: n}
		}
		return true
	})
	return out, err
}

// ParseModulesBuiltin parses modules.builtin: one module file name per
// line for each module built into the kernel image (the kernel's
// scripts/Makefile.modbuiltin), keyed by the module's name with its line.
func ParseModulesBuiltin(b []byte, file string) (map[string]int, error) {
	out := map[string]int{}
	err := eachLine(b, file, func(n int, l []byte) bool {
		line := string(l)
		name, ok := ModuleFileName(line)
		if !ok || strings.ContainsAny(line, " \t") {
			return false
		}
		if _, dup := out[name]; !dup {
			out[name] = n
		}
		return true
	})
	return out, err
}

// Kinds of ModprobeRule.
const (
	RuleBlacklist = "blacklist"
	RuleInstall   = "install"
)

// ModprobeRule is a modprobe.d command that can keep a module from
// loading.
type ModprobeRule struct {
	Kind    string // RuleBlacklist or RuleInstall
	Module  string // normalized
	Command string // an install rule's command, as written
	File    string
	Line    int    // the line the command starts on
	Text    string // the command as written (continuations joined)
}

// Refuses reports whether the rule keeps the module from loading when
// asked for by its alias: a blacklist does (udev loads by alias), and so
// does an install command that does nothing (/bin/false, /bin/true), which
// modprobe runs instead of loading it even when asked by name.
func (r ModprobeRule) Refuses() bool {
	if r.Kind == RuleBlacklist {
		return true
	}
	f := strings.Fields(r.Command)
	if len(f) == 0 {
		return false
	}
	switch path.Base(f[0]) {
	case "false", "true":
		return true
	}
	return false
}

// ParseModprobeConf parses one modprobe.d file the way kmod does
// (libkmod-config.c, kmod_config_parse): a line ending in a backslash
// continues on the next, "#" starts a comment line, the first word is
// the command. Only blacklist and install are kept; kmod ignores a line
// it does not understand, so nothing here is an error.
func ParseModprobeConf(b []byte, file string) []ModprobeRule {
	var out []ModprobeRule
	n := 0
	var pending strings.Builder
	start := 0
	flush := func() {
		line := strings.TrimSpace(pending.String())
		pending.Reset()
		if line == "" || line[0] == '#' {
			return
		}
		f := strings.Fields(line)
		switch {
		case f[0] == RuleBlacklist && len(f) >= 2:
			out = append(out, ModprobeRule{Kind: RuleBlacklist, Module: NormalizeModule(f[1]), File: file, Line: start, Text: line})
		case f[0] == RuleInstall && len(f) >= 3:
			out = append(out, ModprobeRule{Kind: RuleInstall, Module: NormalizeModule(f[1]), Command: afterFields(line, 2), File: file, Line: start, Text: line})
		}
	}
	for l := range bytes.Lines(b) {
		n++
		s := strings.TrimRight(string(l), "\r\n")
		if pending.Len() == 0 {
			start = n
		}
		if c, ok := strings.CutSuffix(s, "\\"); ok {
			pending.WriteString(c)
			pending.WriteByte(' ')
			continue
		}
		pending.WriteString(s)
		flush()
	}
	flush()
	return out
}

// Param is one parameter of the kernel command line.
type Param struct {
	Name     string // with '-' read as '_' (kernel/params.c, parameq)
	Value    string
	HasValue bool
	Raw      string // as written
}

// ParseCmdline splits the kernel command line as the kernel does
// (lib/cmdline.c, next_arg): words separated by spaces, a double-quoted
// part keeps its spaces, the first '=' separates name and value. "--"
// ends the kernel's parameters (what follows is init's, init/main.c).
func ParseCmdline(s string) []Param {
	var out []Param
	i := 0
	for i < len(s) {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			break
		}
		j, quoted := i, false
		var word strings.Builder
		for ; j < len(s) && (quoted || !isSpace(s[j])); j++ {
			if s[j] == '"' {
				quoted = !quoted
				continue
			}
			word.WriteByte(s[j])
		}
		raw := s[i:j]
		i = j
		w := word.String()
		if w == "--" {
			break
		}
		name, val, has := strings.Cut(w, "=")
		out = append(out, Param{Name: NormalizeModule(name), Value: val, HasValue: has, Raw: raw})
	}
	return out
}

// afterFields is s after its first n space-separated words.
func afterFields(s string, n int) string {
	for ; n > 0; n-- {
		s = strings.TrimLeft(s, " \t")
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return ""
		}
		s = s[i:]
	}
	return strings.TrimSpace(s)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// ParseLockdown reads the selected mode of /sys/kernel/security/lockdown,
// which lists the modes with the current one in brackets
// (security/lockdown/lockdown.c, lockdown_read: "none [integrity]
// confidentiality").
func ParseLockdown(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	i := strings.IndexByte(s, '[')
	j := strings.IndexByte(s, ']')
	if i < 0 || j < i+2 || strings.Count(s, "[") != 1 {
		return "", fmt.Errorf("lockdown %q: no mode in brackets", short(s))
	}
	mode := s[i+1 : j]
	switch mode {
	case "none", "integrity", "confidentiality":
		return mode, nil
	}
	return "", fmt.Errorf("lockdown mode %q is not one the kernel has", short(mode))
}

// ModuleSigMarker ends every signed module file: the kernel's
// include/linux/module_signature.h MODULE_SIG_STRING, which scripts/sign-file
// appends after the signature and its trailer.
const ModuleSigMarker = "~Module signature appended~\n"

// HasModuleSignature reports whether a module file's bytes end with the
// signature marker.
func HasModuleSignature(tail []byte) bool { return bytes.HasSuffix(tail, []byte(ModuleSigMarker)) }

// ProbeLine is a kernel log line about a driver's probe of a device.
type ProbeLine struct {
	File string
	Line int
	Text string
	// Error is the errno the driver core printed ("-22"); "" for a line
	// of the driver's own (NVRM).
	Error string
}

// FindProbeLines finds, in a kernel log, the driver core's report of a
// failed probe of device bdf by drv, in both of its forms
// (drivers/base/dd.c: call_driver_probe's dev_err "probe with driver %s
// failed with error %d" since Linux 5.13, and before it really_probe's
// "%s: probe of %s failed with error %d"), and the NVIDIA driver's own
// "NVRM:" lines naming the device. Lines come in log order (the last is
// the latest); of each kind the latest keep are kept.
func FindProbeLines(b []byte, file, bdf, drv string, keep int) []ProbeLine {
	if bdf == "" || drv == "" || !bytes.Contains(b, []byte(bdf)) {
		return nil
	}
	newForm := bdf + ": probe with driver " + drv + " failed with error "
	oldForm := drv + ": probe of " + bdf + " failed with error "
	var probes, own []ProbeLine
	last := func(s []ProbeLine, l ProbeLine) []ProbeLine {
		s = append(s, l)
		if keep > 0 && len(s) > keep {
			s = s[1:]
		}
		return s
	}
	n := 0
	for l := range bytes.Lines(b) {
		n++
		if !bytes.Contains(l, []byte(bdf)) {
			continue
		}
		s := strings.TrimRight(string(l), "\r\n")
		pl := ProbeLine{File: file, Line: n, Text: short(strings.TrimSpace(s))}
		switch {
		case strings.Contains(s, newForm):
			pl.Error = errnoAfter(s, newForm)
			probes = last(probes, pl)
		case strings.Contains(s, oldForm):
			pl.Error = errnoAfter(s, oldForm)
			probes = last(probes, pl)
		case drv == "nvidia" && strings.Contains(s, "NVRM:"):
			own = last(own, pl)
		}
	}
	out := append(probes, own...)
	sort.Slice(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}

func errnoAfter(s, prefix string) string {
	_, rest, _ := strings.Cut(s, prefix)
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// short bounds a string for messages.
func short(s string) string {
	if len(s) <= 200 {
		return s
	}
	return s[:200] + "..."
}
