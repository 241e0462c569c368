package pci

// Kinds returned by IsAccelerator; they match report.Device.Kind.
const (
	KindGPU         = "gpu"
	KindAccelerator = "accelerator"
	KindVideo       = "video"
	KindNIC         = "nic"
	KindOther       = "other"
)

// Class codes and vendor ids used below. Class codes are from the PCI
// Code and ID Assignment Specification (also the "C" section of pci.ids);
// vendor and device ids are from pci.ids (2023.04.10, as shipped by
// Debian 12's pciutils) unless noted.
const (
	classDisplay     = 0x03   // base class: VGA 0x0300, XGA 0x0301, 3D 0x0302, other 0x0380
	classVideo       = 0x0400 // multimedia video controller
	classMultimedia  = 0x0480 // multimedia controller, other
	classCoprocessor = 0x0b40 // processor: co-processor
	classProcAccel   = 0x12   // processing accelerators (0x1200, SDXI 0x1201)
	classNetwork     = 0x02   // network controller
	classMemoryOther = 0x0580 // memory controller, other
	classBridgeOther = 0x0680 // bridge, other

	vendorNVIDIA   = 0x10de
	vendorMellanox = 0x15b3
	vendorXilinx   = 0x10ee
	vendorAmazon   = 0x1d0f
)

// displayOnly are display controllers that are not accelerators: the VGA
// of a server's BMC and the emulated adapters of hypervisors. A device id
// of 0 stands for every device of the vendor.
var displayOnly = map[uint16][]uint16{
	0x1a03: {0},      // ASPEED Technology: AST BMC graphics on most servers
	0x102b: {0},      // Matrox: G200e/eW/eR server BMC graphics (mgag200)
	0x1234: {0},      // QEMU/Bochs standard VGA (vendor "Technical Corp.")
	0x1013: {0},      // Cirrus Logic: QEMU's default cirrus-vga
	0x15ad: {0x0405}, // VMware SVGA II
	0xfffe: {0x0710}, // VMware virtual SVGA (temporary id)
	0x1414: {0x5353}, // Microsoft Hyper-V virtual VGA
	0x1b36: {0x0100}, // Red Hat QXL paravirtual graphic card
	0x1af4: {0x1050}, // Red Hat virtio 1.0 GPU: a paravirtual display, no compute API a device plugin hands out
}

// acceleratorVendors make nothing but accelerators: every function of
// theirs that is not a bridge is an accelerator whatever its class.
var acceleratorVendors = map[uint16]string{
	0x1da3: "Habana Labs (Gaudi, Goya)",
	0x1d95: "Graphcore (IPU)",
	0x1e36: "Shanghai Enflame (CloudBlazer)",
	0x1de0: "Groq",
	0x1e38: "Blaize",
	0x1e60: "Hailo",
	0x1ed2: "FuriosaAI",
	0x1e52: "Tenstorrent (not in pci.ids 2023.04; id from the tt-kmd driver)",
}

// Amazon makes NICs (ENA, EFA) and NVMe controllers too: only its Neuron
// devices count.
var amazonNeuron = map[uint16]bool{0x7064: true, 0x7164: true, 0x7264: true} // Inferentia, Trainium, Inferentia2

// bluefield are the device ids of BlueField DPUs' network functions and SoC
// functions (pci.ids, vendor 15b3, "BlueField" entries). A ConnectX NIC
// without the Arm SoC is not a DPU and not listed.
var bluefield = map[uint16]bool{
	0xa2d0: true, 0xa2d1: true, 0xa2d2: true, 0xa2d3: true, // BlueField
	0xa2d4: true, 0xa2d5: true, 0xa2d6: true, // BlueField-2
	0xa2d7: true, 0xa2d8: true, 0xa2d9: true, // BlueField-3 Lx
	0xa2da: true, 0xa2db: true, 0xa2dc: true, // BlueField-3
	0xa2dd: true, 0xa2de: true, 0xa2df: true, // BlueField-4
}

// IsAccelerator classifies a function. The rules, in order:
//
//   - bridges (class 0x06, NVIDIA's 0x0680 NVSwitch included) are never
//     accelerators.
//   - display controllers (0x03xxxx) are "gpu", except the BMC and
//     hypervisor adapters of displayOnly.
//   - co-processors (0x0b40xx: Intel QAT, Xeon Phi, NEC SX-Aurora) and
//     processing accelerators (0x12xxxx: Habana, Intel NPU, Huawei
//     Ascend, AMD Xilinx Versal) are "accelerator".
//   - multimedia video (0x0400xx) and other multimedia (0x0480xx)
//     controllers are "video"; audio (0x0401, 0x0403: the HDMI audio
//     function of a GPU) is not.
//   - a function whose class could not be read (absent, unreadable,
//     garbage) is judged by what else is known of it: a vendor that makes
//     only accelerators, or a bound driver that drives only accelerators
//     (acceleratorDrivers). It must not silently drop out of the layers
//     that judge accelerators.
//   - by vendor: BlueField DPU network
//     functions are "nic"; Xilinx functions with 0x0580, the default class
//     code of Xilinx's PCIe IP, are FPGA cards ("accelerator"); Amazon
//     Neuron devices and every function of acceleratorVendors are
//     "accelerator".
func IsAccelerator(d *Device) (kind string, ok bool) {
	if !d.Has(HasClass) {
		return classless(d)
	}
	base := uint8(d.Class >> 16)
	sub := uint16(d.Class >> 8)
	vendorKnown := d.Has(HasVendor)

	// NVSwitch (NVIDIA 0x0680) is fabric, not something a pod is given: it
	// has no /dev/nvidiaN and no /proc/driver/nvidia/gpus entry, and is
	// driven by the fabric manager. It stays out of the accelerator list so
	// that layers 2-4 do not judge it as a GPU.
	if base == 0x06 {
		return "", false
	}
	switch {
	case base == classDisplay:
		if vendorKnown && isDisplayOnly(d) {
			return "", false
		}
		return KindGPU, true
	case sub == classCoprocessor || base == classProcAccel:
		return KindAccelerator, true
	case sub == classVideo || sub == classMultimedia:
		return KindVideo, true
	}
	if !vendorKnown {
		return "", false
	}
	switch {
	case d.Vendor == vendorMellanox && base == classNetwork && d.Has(HasDevice) && bluefield[d.Device]:
		return KindNIC, true
	case d.Vendor == vendorXilinx && sub == classMemoryOther:
		return KindAccelerator, true
	case d.Vendor == vendorAmazon && d.Has(HasDevice) && amazonNeuron[d.Device]:
		return KindAccelerator, true
	}
	if _, ok := acceleratorVendors[d.Vendor]; ok {
		return KindAccelerator, true
	}
	return "", false
}

func isDisplayOnly(d *Device) bool {
	ids, ok := displayOnly[d.Vendor]
	if !ok {
		return false
	}
	for _, id := range ids {
		if id == 0 || d.Has(HasDevice) && id == d.Device {
			return true
		}
	}
	return false
}

// acceleratorDrivers are PCI drivers that bind accelerators and nothing
// else, with the kind of what they bind. nvidia.ko registers GPUs as
// "nvidia" and NVSwitches as "nvidia-nvswitch" (open-gpu-kernel-modules,
// kernel-open/nvidia/nv-pci.c and linux_nvswitch.c), so "nvidia" is a GPU.
var acceleratorDrivers = map[string]string{
	"nvidia":     KindGPU,
	"nouveau":    KindGPU,
	"amdgpu":     KindGPU,
	"radeon":     KindGPU,
	"i915":       KindGPU,
	"xe":         KindGPU,
	"habanalabs": KindAccelerator,
	"intel_vpu":  KindAccelerator,
	"ve_drv":     KindAccelerator, // NEC SX-Aurora VectorEngine
}

// classless classifies a function whose class is unknown.
func classless(d *Device) (string, bool) {
	if k, ok := acceleratorDrivers[d.Driver]; ok {
		return k, true
	}
	if d.Has(HasVendor) {
		if _, ok := acceleratorVendors[d.Vendor]; ok {
			return KindAccelerator, true
		}
	}
	return "", false
}

// AcceleratorDriver reports whether drv binds only accelerators, and the
// kind it binds.
func AcceleratorDriver(drv string) (kind string, ok bool) {
	kind, ok = acceleratorDrivers[drv]
	return kind, ok
}
