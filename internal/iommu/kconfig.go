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

// ReadKernelConfig reads /boot/config-RELEASE, else /proc/config.gz.
func ReadKernelConfig(root *hostfs.Root) KernelConfig {
	var k KernelConfig
	var errs []error
	rel, err := root.ReadString(OSReleasePath)
	if err == nil && rel != "" && !strings.ContainsAny(rel, "/\x00") {
		k.Release = rel
		p := "/boot/config-" + rel
		if b, err := root.ReadFileLimit(p, kconfigLimit); err == nil {
			k.Source, k.Options = p, ParseKernelConfig(b)
			return k
		} else {
			errs = append(errs, err)
		}
	} else if err != nil {
		errs = append(errs, err)
	}
	b, err := root.ReadFileLimit(ProcConfigGz, kconfigLimit)
	if err == nil {
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(b)); err == nil {
			var plain []byte
			plain, err = io.ReadAll(io.LimitReader(zr, kconfigLimit+1))
			if err == nil && len(plain) > kconfigLimit {
				err = fmt.Errorf("more than %d bytes uncompressed", kconfigLimit)
			}
			if err == nil {
				k.Source, k.Options = ProcConfigGz, ParseKernelConfig(plain)
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
// "CONFIG_X=y|m|..." and "# CONFIG_X is not set" lines.
func ParseKernelConfig(b []byte) map[string]string {
	want := map[string]bool{}
	for _, o := range kconfigOptions {
		want[o] = true
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "# "); ok {
			if name, ok = strings.CutSuffix(name, " is not set"); ok && want[name] {
				out[name] = "n"
			}
			continue
		}
		if name, v, ok := strings.Cut(line, "="); ok && want[name] {
			out[name] = strings.Trim(v, `"`)
		}
	}
	return out
}
