package iommu

import (
	"bufio"
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

// ReadKernelConfig reads /boot/config-RELEASE, else /proc/config.gz. The
// compressed one is parsed as it is inflated: only the options kept are
// ever held, not the 300 KiB of text (this runs on every check).
func ReadKernelConfig(root *hostfs.Root) KernelConfig {
	var k KernelConfig
	var errs []error
	rel, err := root.ReadString(OSReleasePath)
	if err == nil && rel != "" && !strings.ContainsAny(rel, "/\x00") {
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

// parseKernelConfig reads lines from r, keeping kconfigOptions; the error
// is r's, or a line too long to be a .config's.
func parseKernelConfig(r io.Reader) (map[string]string, error) {
	want := make(map[string]bool, len(kconfigOptions))
	for _, o := range kconfigOptions {
		want[o] = true
	}
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 16<<10), 1<<16)
	for sc.Scan() {
		line := sc.Bytes()
		if name, ok := bytes.CutPrefix(line, []byte("# ")); ok {
			// want[string(b)] does not allocate; only a kept option's
			// name and value become strings.
			if name, ok = bytes.CutSuffix(name, []byte(" is not set")); ok && want[string(name)] {
				out[string(name)] = "n"
			}
			continue
		}
		if name, v, ok := bytes.Cut(line, []byte("=")); ok && want[string(name)] {
			out[string(name)] = strings.Trim(string(v), `"`)
		}
	}
	return out, sc.Err()
}
