package iommu

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// explain sets On, Vendor and Reasons; readKernel fills s.Kernel, which
// only an IOMMU that is off needs.
func (s *State) explain(readKernel func()) {
	say := func(format string, args ...any) { s.Reasons = append(s.Reasons, fmt.Sprintf(format, args...)) }
	fw := &s.Firmware
	s.Vendor = s.vendor()

	// The firmware's description.
	switch fw.Describes() {
	case Yes:
		for _, t := range fw.Tables {
			if t.Present {
				say("%s: %s", t.Path, describeTable(t))
			}
		}
	case No:
		say("%s lists no DMAR, IVRS or VIOT table and no IORT with an SMMU: the firmware describes no IOMMU", fw.Dir)
	default:
		if fw.Covered {
			say("%s could not be listed (%v): whether the firmware describes an IOMMU cannot be told (a device-tree platform has no ACPI tables)", fw.Dir, fw.ListErr)
		} else {
			say("the capture holds no %s: whether the firmware describes an IOMMU cannot be told", fw.Dir)
		}
	}

	// The kernel's answer: groups.
	switch {
	case s.GroupsFromLinks:
		s.On = Yes
		say("the capture holds no %s, but functions have iommu_group links naming %d groups (the kernel creates them as it adds a device to a group): DMA remapping was on; the groups are rebuilt from the links, their default domain types are unknown", GroupsDir, len(s.Groups))
	case s.GroupsErr == nil && len(s.Groups) > 0:
		s.On = Yes
		types, identity := s.domainTypes()
		say("%s holds %d IOMMU groups (default domains: %s): DMA remapping is on", GroupsDir, len(s.Groups), types)
		if identity > 0 {
			say("%d groups have identity default domains (iommu=pt, iommu.passthrough=1 or CONFIG_IOMMU_DEFAULT_PASSTHROUGH): host drivers' DMA is not translated there; VFIO replaces the domain of a group it takes, so device assignment still works", identity)
		}
	case s.GroupsErr == nil:
		s.On = No
		say("%s is empty: the kernel created no IOMMU group, DMA remapping is off", GroupsDir)
	case errors.Is(s.GroupsErr, fs.ErrNotExist) && s.Live:
		// iommu_init creates the kset whenever the kernel has
		// CONFIG_IOMMU_API.
		s.On = No
		say("%s does not exist: the kernel was built without IOMMU support (CONFIG_IOMMU_API), so DMA remapping is off", GroupsDir)
	case errors.Is(s.GroupsErr, fs.ErrNotExist):
		// A tree: a host shows the directory (empty without groups), and
		// its grouped functions have iommu_group links; a capture may
		// keep neither.
		s.On = Unknown
		say("the tree holds no %s and no function has an iommu_group link: whether the kernel grouped any device cannot be told (a capture may keep neither)", GroupsDir)
		s.UnknownWhy = s.Reasons[len(s.Reasons)-1]
	default:
		s.On = Unknown
		say("%s could not be listed: %v", GroupsDir, s.GroupsErr)
		s.UnknownWhy = s.Reasons[len(s.Reasons)-1]
	}
	if s.On == Yes && len(s.Units) > 0 {
		names := make([]string, len(s.Units))
		for i, u := range s.Units {
			names[i] = u.Name
		}
		say("%s lists the IOMMU units %s", ClassDir, strings.Join(names, ", "))
	}

	// The command line, as the kernel reads it.
	c := &s.Cmdline
	if c.Err != nil {
		say("%s could not be read (%v): the kernel parameters are unknown", CmdlinePath, c.Err)
	} else if len(c.Params) == 0 {
		say("%s sets no IOMMU parameter", CmdlinePath)
	}
	for _, n := range c.Notes {
		say("%s: %s", CmdlinePath, n)
	}

	if s.On == No {
		readKernel()
		s.explainOff(say)
	}
}

// vendor names the IOMMU the firmware describes.
func (s *State) vendor() string {
	fw := &s.Firmware
	if fw.Table(SigDMAR).Present {
		return "Intel VT-d"
	}
	if fw.Table(SigIVRS).Present {
		return "AMD-Vi"
	}
	// An IORT also describes interrupt controllers (ITS groups): only
	// SMMU nodes make it an IOMMU; an unreadable table may have them.
	if t := fw.Table(SigIORT); t.Present && (t.IORT == nil || t.IORT.SMMUv1v2+t.IORT.SMMUv3 > 0) {
		return "Arm SMMU"
	}
	if fw.Table(SigVIOT).Present {
		return "virtio-iommu"
	}
	return ""
}

func describeTable(t ACPITable) string {
	var parts []string
	if h := t.Header; h != nil {
		parts = append(parts, fmt.Sprintf("revision %d, OEM %q %q", h.Revision, h.OEMID, h.OEMTableID))
		if !h.ChecksumOK {
			parts = append(parts, "checksum does not match")
		}
	}
	switch {
	case t.DMAR != nil:
		d := t.DMAR
		parts = append(parts, fmt.Sprintf("Intel VT-d, %d remapping unit(s) (DRHD), %d-bit DMA addresses, %d reserved region(s) (RMRR)", d.DRHD, d.HostAddressWidth, d.RMRR))
		if d.PlatformOptIn {
			parts = append(parts, "DMA protection opt-in set: the kernel forces the IOMMU on when a PCI port is marked external-facing (Thunderbolt), unless intel_iommu=off")
		}
	case t.IVRS != nil:
		parts = append(parts, fmt.Sprintf("AMD-Vi, %d IOMMU(s) (IVHD)", t.IVRS.IVHD))
	case t.IORT != nil:
		parts = append(parts, fmt.Sprintf("%d SMMUv3 and %d SMMUv1/v2 node(s), %d root complex(es)", t.IORT.SMMUv3, t.IORT.SMMUv1v2, t.IORT.RootComplexes))
	case t.VIOT != nil:
		parts = append(parts, fmt.Sprintf("virtio-iommu, %d node(s)", t.VIOT.Nodes))
	}
	if t.Err != nil {
		if errors.Is(t.Err, fs.ErrPermission) {
			parts = append(parts, "present, not readable without root (tables are 0400): its fields are unknown")
		} else {
			parts = append(parts, "present, "+t.Err.Error())
		}
	}
	if len(parts) == 0 {
		return "present"
	}
	return strings.Join(parts, "; ")
}

// explainOff says why DMA remapping is off, as far as the host shows it.
func (s *State) explainOff(say func(string, ...any)) {
	c, k := &s.Cmdline, &s.Kernel
	kcfg := func(opt string) string {
		if k.Err != nil {
			return fmt.Sprintf("the kernel's configuration could not be read (neither /boot/config-%s nor %s), so %s is unknown", k.Release, ProcConfigGz, opt)
		}
		switch v := k.Value(opt); v {
		case "":
			return fmt.Sprintf("%s does not mention %s", k.Source, opt)
		case "n":
			return fmt.Sprintf("%s: %s is not set", k.Source, opt)
		default:
			return fmt.Sprintf("%s: %s=%s", k.Source, opt, v)
		}
	}
	switch {
	case c.X86Off:
		say("iommu=off on the command line keeps the IOMMU drivers from initialising: remove it")
	case s.Vendor == "Intel VT-d":
		switch {
		case k.Enabled("CONFIG_INTEL_IOMMU") == No:
			say("the firmware describes an Intel IOMMU but the kernel has no driver for it: %s", kcfg("CONFIG_INTEL_IOMMU"))
		case c.IntelOn == No:
			say("intel_iommu=off on the command line turns it off: remove it, or use intel_iommu=on")
		case c.IntelOn == Yes:
			say("intel_iommu=on is given, yet no group exists: the driver did not initialise (the kernel log's DMAR lines say why)")
		default:
			msg := "no intel_iommu=on on the command line, so the kernel's default applies: " + kcfg("CONFIG_INTEL_IOMMU_DEFAULT_ON")
			if k.Enabled("CONFIG_INTEL_IOMMU_DEFAULT_ON") == No {
				msg += ": off by default; add intel_iommu=on"
			}
			if c.IntelScalable == Yes {
				msg += "; intel_iommu=sm_on alone only selects scalable mode, it does not turn the IOMMU on"
			}
			if t := s.Firmware.Table(SigDMAR); t.DMAR != nil && t.DMAR.PlatformOptIn {
				msg += "; the DMAR opt-in flag forces it on only when a PCI port is marked external-facing, so no such port was found or the driver failed (the kernel log's DMAR lines say which)"
			}
			say("%s", msg)
		}
	case s.Vendor == "AMD-Vi":
		switch {
		case k.Enabled("CONFIG_AMD_IOMMU") == No:
			say("the firmware describes an AMD IOMMU but the kernel has no driver for it: %s", kcfg("CONFIG_AMD_IOMMU"))
		case c.AMDOff:
			say("amd_iommu=off on the command line turns it off: remove it")
		default:
			say("the AMD IOMMU is on by default where an IVRS table exists, yet no group exists: the driver did not initialise or rejected the table (the kernel log's AMD-Vi lines say why); %s", kcfg("CONFIG_AMD_IOMMU"))
		}
	case s.Vendor == "Arm SMMU":
		say("the firmware describes an Arm SMMU, yet no group exists: its driver (arm-smmu-v3 or arm-smmu) is not loaded or did not probe; %s", kcfg("CONFIG_ARM_SMMU_V3"))
	case s.Vendor == "virtio-iommu":
		say("the firmware describes a virtio-iommu, yet no group exists: %s", kcfg("CONFIG_VIRTIO_IOMMU"))
	case len(s.Units) > 0:
		names := make([]string, len(s.Units))
		for i, u := range s.Units {
			names[i] = u.Name
		}
		say("%s lists the IOMMU units %s, yet no group exists: their driver registered them but added no device to a group (the kernel log says why)", ClassDir, strings.Join(names, ", "))
	case s.Firmware.Describes() == No:
		say("no IOMMU: a machine gets one from its firmware (VT-d, AMD-Vi, SMMU enabled in the BIOS/UEFI setup); a virtual machine only if the hypervisor emulates one (QEMU -device intel-iommu or -device virtio-iommu-pci)")
		if k.Err == nil {
			var drivers []string
			for _, o := range []string{"CONFIG_INTEL_IOMMU", "CONFIG_AMD_IOMMU", "CONFIG_ARM_SMMU_V3", "CONFIG_VIRTIO_IOMMU"} {
				if k.Enabled(o) == No {
					drivers = append(drivers, o)
				}
			}
			if len(drivers) > 0 {
				say("%s: %s not set: this kernel could not drive such an IOMMU either", k.Source, strings.Join(drivers, ", "))
			}
		}
	default:
		say("whether the firmware describes an IOMMU is unknown, so why none is on cannot be told")
	}
}

func orUnknown(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}
