package driver

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// NVIDIAVersionPath is written by the NVIDIA kernel module when it loads
// (kernel-open/nvidia/nv-procfs.c in open-gpu-kernel-modules).
const NVIDIAVersionPath = "/proc/driver/nvidia/version"

// NVIDIAGPUsDir holds one directory per GPU the NVIDIA module drives,
// named by PCI address ("0000:17:00.0").
const NVIDIAGPUsDir = "/proc/driver/nvidia/gpus"

// NVIDIAVersion is the first line of /proc/driver/nvidia/version.
type NVIDIAVersion struct {
	Version string // "550.54.15"
	Open    bool   // the open kernel module ("Open Kernel Module for ...")
	Arch    string // "x86_64", "aarch64", "ppc64le"; "" when the line names none
	GCC     string // the compiler line, "" when absent
}

// ParseNVIDIAVersion parses /proc/driver/nvidia/version. The proprietary
// module writes
//
//	NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024
//
// the open module and Tegra (Jetson) builds write
//
//	NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@...)  Thu Oct 10 ...
//	NVRM version: NVIDIA UNIX Kernel Module for aarch64  35.3.1  Release Build  (buildbrain@...)  ...
//
// and a "GCC version:" line follows.
func ParseNVIDIAVersion(b []byte) (NVIDIAVersion, error) {
	var v NVIDIAVersion
	var nvrm string
	found := false
	// Lines are split without a length limit (bufio.Scanner's 64 KiB
	// token limit would lose the whole file to one long line); the read
	// limit of the file bounds them.
	for l := range bytes.Lines(b) {
		line := strings.TrimSpace(string(l))
		if rest, ok := strings.CutPrefix(line, "NVRM version:"); ok && !found {
			nvrm, found = strings.TrimSpace(rest), true
		} else if rest, ok := strings.CutPrefix(line, "GCC version:"); ok && v.GCC == "" {
			v.GCC = strings.TrimSpace(rest)
		}
	}
	if !found {
		return v, errors.New(`nvidia version: no "NVRM version:" line`)
	}
	f := strings.Fields(nvrm)
	// Find "Kernel Module"; what precedes and follows it names the arch.
	km := -1
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "Kernel" && f[i+1] == "Module" {
			km = i
			break
		}
	}
	if km < 0 {
		return v, fmt.Errorf(`nvidia version: no "Kernel Module" in %s`, quote(nvrm))
	}
	next := km + 2
	if km > 0 && f[km-1] == "Open" {
		v.Open = true
	}
	if next+1 < len(f) && f[next] == "for" {
		v.Arch = f[next+1]
		next += 2
	} else if km > 0 && f[km-1] != "UNIX" && f[km-1] != "Open" {
		v.Arch = f[km-1]
	}
	if next >= len(f) {
		return v, fmt.Errorf("nvidia version: no version after %s", quote(strings.Join(f[:next], " ")))
	}
	if !IsDriverVersion(f[next]) {
		return v, fmt.Errorf("nvidia version: %s is not a version", quote(f[next]))
	}
	v.Version = f[next]
	return v, nil
}

// IsDriverVersion reports whether s looks like an NVIDIA driver version:
// two or more dot-separated decimal numbers ("550.54.15", "418.67").
func IsDriverVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 9 {
			return false
		}
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return false
		}
	}
	return true
}

// ReadNVIDIAVersion reads and parses NVIDIAVersionPath.
func ReadNVIDIAVersion(root *hostfs.Root) (NVIDIAVersion, error) {
	b, err := root.ReadFile(NVIDIAVersionPath)
	if err != nil {
		return NVIDIAVersion{}, err
	}
	v, err := ParseNVIDIAVersion(b)
	if err != nil {
		return v, fmt.Errorf("%s: %w", NVIDIAVersionPath, err)
	}
	return v, nil
}

// GPUInformation is /proc/driver/nvidia/gpus/<BDF>/information: "Key:
// value" lines (nv-procfs.c, nv_procfs_read_gpu_info).
type GPUInformation struct {
	Model       string
	IRQ         *int
	UUID        string // "GPU-..."; "" when absent
	VideoBIOS   string
	BusType     string
	DMASize     string
	DMAMask     string
	BusLocation string // "0000:17:00.0"
	// DeviceMinor is the minor of /dev/nvidia<N> (major 195); nil when the
	// line is absent.
	DeviceMinor *uint32
	// Fields holds every "Key: value" line, including the ones above.
	Fields map[string]string
}

// ParseGPUInformation parses the information file. Lines without a colon
// are ignored (some drivers print blank or decorative lines); a Device
// Minor or IRQ that is not a number is an error.
func ParseGPUInformation(b []byte) (GPUInformation, error) {
	info := GPUInformation{Fields: map[string]string{}}
	for l := range bytes.Lines(b) { // no line-length limit: see ParseNVIDIAVersion
		k, val, ok := strings.Cut(string(l), ":")
		if !ok {
			continue
		}
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if k == "" {
			continue
		}
		if _, dup := info.Fields[k]; dup {
			continue // the first one wins, as a reader of the file would see it
		}
		info.Fields[k] = val
		if err := info.set(k, val); err != nil {
			return info, err
		}
	}
	if len(info.Fields) == 0 {
		return info, errors.New("gpu information: no \"Key: value\" lines")
	}
	return info, nil
}

// set stores one known field.
func (info *GPUInformation) set(k, val string) error {
	switch k {
	case "Model":
		info.Model = val
	case "IRQ":
		n, err := strconv.Atoi(val)
		if err != nil {
			return fmt.Errorf("gpu information: IRQ %s is not a number", quote(val))
		}
		info.IRQ = &n
	case "GPU UUID":
		info.UUID = val
	case "Video BIOS":
		info.VideoBIOS = val
	case "Bus Type":
		info.BusType = val
	case "DMA Size":
		info.DMASize = val
	case "DMA Mask":
		info.DMAMask = val
	case "Bus Location":
		info.BusLocation = val
	case "Device Minor":
		n, err := strconv.ParseUint(val, 10, 32)
		// Minors 254 and 255 are nvidia-modeset and nvidiactl
		// (kernel-open/common/inc/nv.h), so a GPU's minor is below.
		if err != nil || n >= 254 {
			return fmt.Errorf("gpu information: Device Minor %s is not a GPU minor (0-253)", quote(val))
		}
		m := uint32(n)
		info.DeviceMinor = &m
	}
	return nil
}

// quote quotes s for an error message, cut to 64 bytes: a hostile
// 64 KiB line must not become 64 KiB of evidence.
func quote(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:max]), len(s))
}

// GPUInformationPath is where the information file of the GPU at bdf lives.
func GPUInformationPath(bdf string) string {
	return path.Join(NVIDIAGPUsDir, bdf, "information")
}

// ReadGPUInformation reads the information file of the GPU at bdf
// ("0000:17:00.0").
func ReadGPUInformation(root *hostfs.Root, bdf string) (GPUInformation, error) {
	if bdf == "" || strings.Contains(bdf, "/") || bdf == "." || bdf == ".." {
		return GPUInformation{}, fmt.Errorf("PCI address %q is not a single path element", bdf)
	}
	p := GPUInformationPath(bdf)
	b, err := root.ReadFile(p)
	if err != nil {
		return GPUInformation{}, err
	}
	info, err := ParseGPUInformation(b)
	if err != nil {
		return info, fmt.Errorf("%s: %w", p, err)
	}
	return info, nil
}
