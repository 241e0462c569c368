package iommu

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// The running kernel's build configuration, where it can be read: the
// distribution's /boot/config-RELEASE, or /proc/config.gz
// (CONFIG_IKCONFIG_PROC). It decides what the command line does not: is
// the Intel IOMMU on by default, are default domains identity, lazy or
// strict, is there an IOMMU driver at all.
const (
	OSReleasePath = "/proc/sys/kernel/osrelease"
	ProcConfigGz  = "/proc/config.gz"
)

// kconfigLimit bounds the uncompressed config (about 300 KiB on Debian).
const kconfigLimit = 4 << 20

// kconfigOptions are the options kept.
var kconfigOptions = []string{
	"CONFIG_IOMMU_API", "CONFIG_IOMMU_SUPPORT",
	"CONFIG_INTEL_IOMMU", "CONFIG_INTEL_IOMMU_DEFAULT_ON", "CONFIG_INTEL_IOMMU_DEFAULT_ON_INTGPU_OFF",
	"CONFIG_INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON",
	"CONFIG_AMD_IOMMU", "CONFIG_ARM_SMMU", "CONFIG_ARM_SMMU_V3", "CONFIG_VIRTIO_IOMMU",
	"CONFIG_IOMMU_DEFAULT_PASSTHROUGH", "CONFIG_IOMMU_DEFAULT_DMA_LAZY", "CONFIG_IOMMU_DEFAULT_DMA_STRICT",
	"CONFIG_VFIO", "CONFIG_VFIO_PCI", "CONFIG_IOMMUFD",
}

// KernelConfig is the IOMMU part of the kernel's build configuration.
type KernelConfig struct {
	Release string // /proc/sys/kernel/osrelease
	Source  string // the file read; "" when none could be
	// Err says why no configuration could be read (both places absent
	// or unreadable); what depends on it cannot be told.
	Err     error
	Options map[string]string // "y", "m", or "n" for "# CONFIG_X is not set"
}

// Value returns an option's value: "y", "m", "n", or "" when the
// configuration was not read or does not mention it (an option of
// another kernel version).
func (k KernelConfig) Value(name string) string { return k.Options[name] }

// Enabled is Yes for y or m, No for n, Unknown when not known.
func (k KernelConfig) Enabled(name string) Tri {
	switch k.Options[name] {
	case "y", "m":
		return Yes
	case "n":
		return No
	}
	return Unknown
}

// ErrKernelConfigNotRead is State.Kernel's Err when nothing asked for the
// configuration: Read reads it only to explain an IOMMU that is off.
var ErrKernelConfigNotRead = errors.New("the kernel configuration was not read: the IOMMU state does not depend on it")

// validRelease reports whether rel, the running kernel's release, can
// name /boot/config-RELEASE and /lib/modules/RELEASE.
func validRelease(rel string) bool { return rel != "" && !strings.ContainsAny(rel, "/\x00") }

// ReadKernelConfig reads /boot/config-RELEASE, else /proc/config.gz. The
// compressed one is parsed as it is inflated: only the options kept are
// ever held, not the 300 KiB of text.
func ReadKernelConfig(root *hostfs.Root) KernelConfig {
	var k KernelConfig
	var errs []error
	rel, err := root.ReadString(OSReleasePath)
	if err == nil && validRelease(rel) {
		k.Release = rel
		p := "/boot/config-" + rel
		b, err := root.ReadFileLimit(p, kconfigLimit)
		if err == nil {
			var opts map[string]string
			if opts, err = parseKernelConfig(bytes.NewReader(b)); err == nil {
				k.Source, k.Options = p, opts
				return k
			}
			err = fmt.Errorf("read %s: %w", p, err)
		}
		errs = append(errs, err)
	} else if err != nil {
		errs = append(errs, err)
	}
	b, err := root.ReadFileLimit(ProcConfigGz, kconfigLimit)
	if err == nil {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
			lr := &io.LimitedReader{R: zr, N: kconfigLimit + 1}
			var opts map[string]string
			opts, err = parseKernelConfig(lr)
			if err == nil && lr.N == 0 {
				err = fmt.Errorf("more than %d bytes uncompressed", kconfigLimit)
			}
			if err == nil {
				k.Source, k.Options = ProcConfigGz, opts
				return k
			}
		}
		err = fmt.Errorf("read %s: %w", ProcConfigGz, err)
	}
	errs = append(errs, err)
	k.Err = errors.Join(errs...)
	return k
}

// ParseKernelConfig keeps the IOMMU options of a kernel .config:
// "CONFIG_X=y|m|..." and "# CONFIG_X is not set" lines. What a malformed
// file (a line over 64 KiB) leaves unread is simply not kept.
func ParseKernelConfig(b []byte) map[string]string {
	out, _ := parseKernelConfig(bytes.NewReader(b))
	return out
}

// kconfigMaxLine is the longest line parseKernelConfig takes (as the
// bufio.Scanner it replaced did); a .config's longest are string options
// such as CONFIG_CMDLINE, which the architecture's COMMAND_LINE_SIZE
// bounds (2048 bytes on x86, arch/x86/include/asm/setup.h).
const kconfigMaxLine = 64 << 10

// kconfigLineStart is the first buffer: large enough for every line of a
// real .config, small enough to cost two pages.
const kconfigLineStart = 8 << 10

// kconfigMatcher finds the kept options among a configuration's names.
// A Debian configuration has some 10,000 lines: the byte after CONFIG_
// rules out most before any name is compared, and a line is compared in
// place, so that only the kept ones become strings.
type kconfigMatcher struct{ first [256]bool }

func newKconfigMatcher() *kconfigMatcher {
	m := &kconfigMatcher{}
	for _, o := range kconfigOptions {
		m.first[o[len("CONFIG_")]] = true // every kept option is CONFIG_ and more (a test holds it)
	}
	return m
}

// option returns the kept option that name spells, or "".
func (m *kconfigMatcher) option(name []byte) string {
	if len(name) <= len("CONFIG_") || !m.first[name[len("CONFIG_")]] {
		return ""
	}
	for _, o := range kconfigOptions {
		if len(o) == len(name) && o == string(name) {
			return o
		}
	}
	return ""
}

// The two forms of an option's line (scripts/kconfig/confdata.c writes
// "CONFIG_X=v" and, for an unset bool or tristate, "# CONFIG_X is not set").
var (
	kconfigSet    = []byte("CONFIG_")
	kconfigNotSet = []byte("# CONFIG_")
	kconfigNotEnd = []byte(" is not set")
)

// parseKernelConfig reads lines from r, keeping kconfigOptions; the error
// is r's, or a line too long to be a .config's. It splits the lines
// itself, in one buffer it refills, instead of a bufio.Scanner: this runs
// on every check that finds the IOMMU off, over the ~100-300 KiB that
// /proc/config.gz inflates to, and the lines it keeps are a dozen.
func parseKernelConfig(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	m := newKconfigMatcher()
	buf := make([]byte, kconfigLineStart)
	start, end := 0, 0 // buf[start:end] is read and not yet split
	var rerr error
	empty := 0
	for {
		// Split every complete line in buf[start:end].
		for {
			i := bytes.IndexByte(buf[start:end], '\n')
			if i < 0 {
				break
			}
			m.keep(out, buf[start:start+i])
			start += i + 1
		}
		if rerr != nil {
			if rerr != io.EOF {
				return out, rerr
			}
			if start < end { // a last line without its newline
				m.keep(out, buf[start:end])
			}
			return out, nil
		}
		// Move the partial line to the front; grow when it fills buf.
		if start > 0 {
			end = copy(buf, buf[start:end])
			start = 0
		}
		if end == len(buf) {
			if len(buf) >= kconfigMaxLine {
				return out, fmt.Errorf("a line longer than %d bytes: not a kernel configuration", kconfigMaxLine)
			}
			buf = append(buf, make([]byte, len(buf))...)
		}
		var n int
		n, rerr = r.Read(buf[end:])
		end += n
		// io.Reader allows (0, nil); a reader that keeps giving it would
		// spin here (bufio.Scanner gives up after 100 the same way).
		if empty++; n > 0 {
			empty = 0
		} else if empty >= 100 && rerr == nil {
			rerr = io.ErrNoProgress
		}
	}
}

// keep records line in out when it sets or unsets a kept option.
func (m *kconfigMatcher) keep(out map[string]string, line []byte) {
	line, _ = bytes.CutSuffix(line, []byte("\r")) // as bufio.ScanLines drops it
	if rest, ok := bytes.CutPrefix(line, kconfigNotSet); ok {
		if name, ok := bytes.CutSuffix(rest, kconfigNotEnd); ok {
			if o := m.option(line[2 : 2+len(kconfigSet)+len(name)]); o != "" {
				out[o] = "n"
			}
		}
		return
	}
	if !bytes.HasPrefix(line, kconfigSet) {
		return
	}
	if name, v, ok := bytes.Cut(line, []byte("=")); ok {
		if o := m.option(name); o != "" {
			out[o] = strings.Trim(string(v), `"`)
		}
	}
}
