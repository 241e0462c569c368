package driver

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func TestParseNVIDIAVersion(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    NVIDIAVersion
		wantErr bool
	}{{
		name: "proprietary x86_64",
		in:   "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
		want: NVIDIAVersion{Version: "550.54.15", Arch: "x86_64", GCC: "gcc version 12.2.0 (Debian 12.2.0-14)"},
	}, {
		name: "open x86_64",
		in:   "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Oct 10 12:29:05 UTC 2024\nGCC version:  gcc version 13.2.0 (Ubuntu 13.2.0-23ubuntu4)\n",
		want: NVIDIAVersion{Version: "565.57.01", Open: true, Arch: "x86_64", GCC: "gcc version 13.2.0 (Ubuntu 13.2.0-23ubuntu4)"},
	}, {
		name: "proprietary aarch64 (Grace, SBSA)",
		in:   "NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.104.05  Sat Aug 19 01:13:02 UTC 2023\n",
		want: NVIDIAVersion{Version: "535.104.05", Arch: "aarch64"},
	}, {
		name: "open aarch64",
		in:   "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  560.35.03  Release Build  (dvs-builder@U16-I1-N07-12-3)  Fri Aug 16 21:21:48 UTC 2024\n",
		want: NVIDIAVersion{Version: "560.35.03", Open: true, Arch: "aarch64"},
	}, {
		name: "Jetson L4T",
		in:   "NVRM version: NVIDIA UNIX Kernel Module for aarch64  35.3.1  Release Build  (buildbrain@mobile-u64-5273-d7000)  Thu Mar 16 13:32:25 PDT 2023\n",
		want: NVIDIAVersion{Version: "35.3.1", Arch: "aarch64"},
	}, {
		name: "ppc64le",
		in:   "NVRM version: NVIDIA UNIX ppc64le Kernel Module  418.67  Sat Apr  6 02:47:47 CDT 2019\nGCC version:  gcc version 4.8.5 20150623 (Red Hat 4.8.5-36) (GCC) \n",
		want: NVIDIAVersion{Version: "418.67", Arch: "ppc64le", GCC: "gcc version 4.8.5 20150623 (Red Hat 4.8.5-36) (GCC)"},
	}, {
		name:    "empty",
		in:      "",
		wantErr: true,
	}, {
		name:    "no NVRM line",
		in:      "GCC version:  gcc version 12.2.0\n",
		wantErr: true,
	}, {
		name:    "no Kernel Module",
		in:      "NVRM version: something else 550.54.15\n",
		wantErr: true,
	}, {
		name:    "version missing",
		in:      "NVRM version: NVIDIA UNIX x86_64 Kernel Module\n",
		wantErr: true,
	}, {
		name:    "version not a number",
		in:      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  Tue Mar  5 2024\n",
		wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNVIDIAVersion([]byte(tt.in))
			testutil.CheckParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func FuzzParseNVIDIAVersion(f *testing.F) {
	f.Add([]byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version:  gcc\n"))
	f.Add([]byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build\n"))
	f.Add([]byte("NVRM version: Kernel Module for"))
	f.Add([]byte("NVRM version: Open Kernel Module"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseNVIDIAVersion(b)
		if err == nil && !IsDriverVersion(v.Version) {
			t.Fatalf("accepted version %q", v.Version)
		}
	})
}

const h100Info = "Model: \t\t NVIDIA H100 80GB HBM3\n" +
	"IRQ:   \t\t 0\n" +
	"GPU UUID: \t GPU-3b9d7c3c-0d8e-bd0a-3c6f-8b8f4e6d9a01\n" +
	"Video BIOS: \t 96.00.99.00.01\n" +
	"Bus Type: \t PCIe\n" +
	"DMA Size: \t 52 bits\n" +
	"DMA Mask: \t 0xfffffffffffff\n" +
	"Bus Location: \t 0000:17:00.0\n" +
	"Device Minor: \t 3\n" +
	"GPU Excluded:\t No\n"

func TestParseGPUInformation(t *testing.T) {
	irq0, minor3 := 0, uint32(3)
	tests := []struct {
		name    string
		in      string
		want    GPUInformation
		wantErr bool
	}{{
		name: "H100",
		in:   h100Info,
		want: GPUInformation{
			Model: "NVIDIA H100 80GB HBM3", IRQ: &irq0, UUID: "GPU-3b9d7c3c-0d8e-bd0a-3c6f-8b8f4e6d9a01",
			VideoBIOS: "96.00.99.00.01", BusType: "PCIe", DMASize: "52 bits", DMAMask: "0xfffffffffffff",
			BusLocation: "0000:17:00.0", DeviceMinor: &minor3,
			Fields: map[string]string{
				"Model": "NVIDIA H100 80GB HBM3", "IRQ": "0", "GPU UUID": "GPU-3b9d7c3c-0d8e-bd0a-3c6f-8b8f4e6d9a01",
				"Video BIOS": "96.00.99.00.01", "Bus Type": "PCIe", "DMA Size": "52 bits", "DMA Mask": "0xfffffffffffff",
				"Bus Location": "0000:17:00.0", "Device Minor": "3", "GPU Excluded": "No",
			},
		},
	}, {
		name: "no Device Minor (older drivers)",
		in:   "Model: \t\t Tesla V100-SXM2-16GB\nBus Location: \t 0004:04:00.0\n",
		want: GPUInformation{Model: "Tesla V100-SXM2-16GB", BusLocation: "0004:04:00.0",
			Fields: map[string]string{"Model": "Tesla V100-SXM2-16GB", "Bus Location": "0004:04:00.0"}},
	}, {
		name:    "minor not a number",
		in:      "Device Minor: \t x\n",
		wantErr: true,
	}, {
		name:    "minor of nvidiactl",
		in:      "Device Minor: 255\n",
		wantErr: true,
	}, {
		name:    "IRQ not a number",
		in:      "IRQ: many\n",
		wantErr: true,
	}, {
		name:    "nothing",
		in:      "\n\n",
		wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseGPUInformation([]byte(tt.in))
			testutil.CheckParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func FuzzParseGPUInformation(f *testing.F) {
	f.Add([]byte(h100Info))
	f.Add([]byte("Device Minor: 253\n"))
	f.Add([]byte(":::\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseGPUInformation(b)
		if err == nil && info.DeviceMinor != nil && *info.DeviceMinor >= 254 {
			t.Fatalf("accepted minor %d", *info.DeviceMinor)
		}
	})
}

func TestReadNVIDIA(t *testing.T) {
	dir := tree(t, map[string]string{
		"/proc/driver/nvidia/version":                       "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
		"/proc/driver/nvidia/gpus/0000:17:00.0/information": h100Info,
		"/proc/driver/nvidia/gpus/0000:18:00.0/information": "Device Minor: soon\n",
	}, nil)
	root := hostfs.MustNew(dir)
	v, err := ReadNVIDIAVersion(root)
	if err != nil || v.Version != "550.54.15" {
		t.Errorf("ReadNVIDIAVersion = %+v, %v", v, err)
	}
	info, err := ReadGPUInformation(root, "0000:17:00.0")
	if err != nil || info.DeviceMinor == nil || *info.DeviceMinor != 3 {
		t.Errorf("ReadGPUInformation = %+v, %v", info, err)
	}
	if _, err := ReadGPUInformation(root, "0000:18:00.0"); err == nil {
		t.Error("malformed information file: no error")
	}
	if _, err := ReadGPUInformation(root, "0000:19:00.0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent GPU: err = %v, want ErrNotExist", err)
	}
	if _, err := ReadGPUInformation(root, "../../../etc"); err == nil {
		t.Error("path in address: no error")
	}
	if _, err := ReadNVIDIAVersion(hostfs.MustNew(t.TempDir())); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no driver: err = %v, want ErrNotExist", err)
	}
}

// TestNVIDIAProcLongLine: one line over bufio.Scanner's 64 KiB token
// limit used to make the whole file unreadable; the lines around it are
// still read, and an error quoting it stays short.
func TestNVIDIAProcLongLine(t *testing.T) {
	long := strings.Repeat("x", 70<<10)
	v, err := ParseNVIDIAVersion([]byte(long + "\nNVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"))
	if err != nil || v.Version != "550.54.15" {
		t.Errorf("version after a long line: %+v %v", v, err)
	}
	info, err := ParseGPUInformation([]byte("Model: " + long + "\nDevice Minor: 3\n"))
	if err != nil || info.DeviceMinor == nil || *info.DeviceMinor != 3 {
		t.Errorf("information after a long line: %v %v", info.DeviceMinor, err)
	}
	_, err = ParseGPUInformation([]byte("Device Minor: " + long + "\n"))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("a long bad Device Minor: error of %d bytes", len(err.Error()))
	}
}
