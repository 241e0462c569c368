package pci

import "testing"

func TestIsAccelerator(t *testing.T) {
	all := HasVendor | HasDevice | HasClass
	tests := []struct {
		name    string
		d       Device
		kind    string
		isAccel bool
	}{
		{"H100 3D controller", Device{Present: all, Vendor: 0x10de, Device: 0x2330, Class: 0x030200}, KindGPU, true},
		{"GPU VGA", Device{Present: all, Vendor: 0x1002, Device: 0x6758, Class: 0x030000}, KindGPU, true},
		{"GPU HDMI audio", Device{Present: all, Vendor: 0x10de, Device: 0x22a3, Class: 0x040300}, "", false},
		{"NVSwitch", Device{Present: all, Vendor: 0x10de, Device: 0x1af1, Class: 0x068000}, "", false},
		{"NVIDIA bridge", Device{Present: all, Vendor: 0x10de, Device: 0x1ad0, Class: 0x060400}, "", false},
		{"NVIDIA USB on a GPU", Device{Present: all, Vendor: 0x10de, Device: 0x1ad6, Class: 0x0c0330}, "", false},
		{"ASPEED BMC VGA", Device{Present: all, Vendor: 0x1a03, Device: 0x2000, Class: 0x030000}, "", false},
		{"Matrox BMC VGA", Device{Present: all, Vendor: 0x102b, Device: 0x0532, Class: 0x030000}, "", false},
		{"virtio GPU", Device{Present: all, Vendor: 0x1af4, Device: 0x1050, Class: 0x038000}, "", false},
		{"VGA, vendor unreadable", Device{Present: HasClass, Class: 0x030000}, KindGPU, true},
		{"Intel QAT", Device{Present: all, Vendor: 0x8086, Device: 0x37c8, Class: 0x0b4000}, KindAccelerator, true},
		{"NEC VectorEngine", Device{Present: all, Vendor: 0x1bcf, Device: 0x001c, Class: 0x0b4000}, KindAccelerator, true},
		{"Habana Gaudi2", Device{Present: all, Vendor: 0x1da3, Device: 0x1020, Class: 0x120000}, KindAccelerator, true},
		{"Graphcore IPU odd class", Device{Present: all, Vendor: 0x1d95, Device: 0x0002, Class: 0x0b4000}, KindAccelerator, true},
		{"Graphcore, vendor-only rule", Device{Present: all, Vendor: 0x1d95, Device: 0x0001, Class: 0xff0000}, KindAccelerator, true},
		{"Habana bridge", Device{Present: all, Vendor: 0x1da3, Device: 0x0001, Class: 0x060400}, "", false},
		{"video decoder", Device{Present: all, Vendor: 0x1e3e, Device: 0x0001, Class: 0x040000}, KindVideo, true},
		{"multimedia other", Device{Present: all, Vendor: 0x8086, Device: 0x0001, Class: 0x048000}, KindVideo, true},
		{"audio", Device{Present: all, Vendor: 0x8086, Device: 0x51c8, Class: 0x040100}, "", false},
		{"BlueField-3 NIC", Device{Present: all, Vendor: 0x15b3, Device: 0xa2dc, Class: 0x020000}, KindNIC, true},
		{"ConnectX-7 NIC", Device{Present: all, Vendor: 0x15b3, Device: 0x1021, Class: 0x020000}, "", false},
		{"ConnectX-4 IB", Device{Present: all, Vendor: 0x15b3, Device: 0x1013, Class: 0x020700}, "", false},
		{"BlueField id, bridge", Device{Present: all, Vendor: 0x15b3, Device: 0xa2dc, Class: 0x060400}, "", false},
		{"Xilinx Alveo default class", Device{Present: all, Vendor: 0x10ee, Device: 0x5000, Class: 0x058000}, KindAccelerator, true},
		{"Xilinx other", Device{Present: all, Vendor: 0x10ee, Device: 0x9038, Class: 0x070000}, "", false},
		{"AWS Inferentia", Device{Present: all, Vendor: 0x1d0f, Device: 0x7064, Class: 0x088000}, KindAccelerator, true},
		{"AWS ENA", Device{Present: all, Vendor: 0x1d0f, Device: 0xec20, Class: 0x020000}, "", false},
		{"processing accel", Device{Present: all, Vendor: 0x1b36, Device: 0x0005, Class: 0x120000}, KindAccelerator, true},
		{"NIC", Device{Present: all, Vendor: 0x8086, Device: 0x1592, Class: 0x020000}, "", false},
		{"class unreadable", Device{Present: HasVendor | HasDevice, Vendor: 0x10de, Device: 0x2330}, "", false},
		{"class unreadable, bound to nvidia", Device{Present: HasVendor | HasDevice, Vendor: 0x10de, Device: 0x2330, Driver: "nvidia"}, KindGPU, true},
		{"class unreadable, NVSwitch driver", Device{Present: HasVendor, Vendor: 0x10de, Driver: "nvidia-nvswitch"}, "", false},
		{"class unreadable, Habana", Device{Present: HasVendor, Vendor: 0x1da3}, KindAccelerator, true},
		{"class unreadable, vendor unreadable, no driver", Device{}, "", false},
	}
	for _, tt := range tests {
		kind, ok := IsAccelerator(&tt.d)
		if kind != tt.kind || ok != tt.isAccel {
			t.Errorf("%s: IsAccelerator = %q, %v; want %q, %v", tt.name, kind, ok, tt.kind, tt.isAccel)
		}
	}
}
