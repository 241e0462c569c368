// Command accel-doctor-cuda is the companion of accel-doctor's functional
// probe that loads the NVIDIA driver's user-space libraries: NVML
// (libnvidia-ml.so.1: nvmlInit_v2, the driver version, nvmlDeviceGetCount_v2)
// and the CUDA driver API (libcuda.so.1: cuInit, cuDriverGetVersion,
// cuDeviceGetCount and, for each device, its name, a context, a 1 MiB
// allocation and a copy there and back checked byte for byte).
//
// Those libraries are glibc shared objects, and only a dynamically linked
// process can load one. accel-doctor itself is static so that it runs in
// any image; this helper is built with purego without cgo
// (CGO_ENABLED=0), which makes it a small dynamically linked executable
// (PT_INTERP /lib64/ld-linux-x86-64.so.2, DT_NEEDED libc.so.6, libdl.so.2,
// libpthread.so.0) that starts only where a glibc loader exists — which is
// exactly where those libraries can be loaded. `accel-doctor probe` runs it
// when it found a library to load, and reads its answers: one JSON object
// per line on stdout (internal/probe HelperLine), a "begin" line before
// each call so that a call that never returns is named.
//
//	accel-doctor-cuda --lib nvml --lib cuda
//
// It is not a diagnosis by itself: it reports the calls and their result
// codes; accel-doctor maps the codes to causes. It writes nothing but its
// output and allocates 1 MiB of device memory per GPU, freed at once.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/accel-doctor/accel-doctor/internal/probe"
)

func init() {
	// A CUDA context is current on the thread that made it; every call of
	// this program runs on the main goroutine, locked to one OS thread.
	runtime.LockOSThread()
}

type libsFlag []string

func (l *libsFlag) String() string { return strings.Join(*l, ",") }
func (l *libsFlag) Set(s string) error {
	if s != probe.HelperCUDA && s != probe.HelperNVML {
		return fmt.Errorf("unknown library %q (want %s or %s)", s, probe.HelperNVML, probe.HelperCUDA)
	}
	*l = append(*l, s)
	return nil
}

func main() {
	var libs libsFlag
	flag.Var(&libs, "lib", "a library to probe: nvml or cuda (repeatable)")
	maxDevices := flag.Int("max-devices", 16, "probe at most this many CUDA devices")
	flag.Parse()
	if len(libs) == 0 {
		fmt.Fprintln(os.Stderr, "accel-doctor-cuda: give --lib nvml and/or --lib cuda")
		os.Exit(2)
	}
	w := &writer{enc: json.NewEncoder(os.Stdout)}
	for _, l := range libs {
		w.lib = l
		switch l {
		case probe.HelperNVML:
			probeNVML(w)
		case probe.HelperCUDA:
			probeCUDA(w, *maxDevices)
		}
		w.line(probe.HelperLine{Done: true})
	}
}

// writer sends HelperLines for the current library.
type writer struct {
	enc *json.Encoder
	lib string
}

func (w *writer) line(l probe.HelperLine) {
	l.Lib = w.lib
	if err := w.enc.Encode(l); err != nil {
		os.Exit(3) // the reader is gone
	}
}

func (w *writer) begin(name string) { w.line(probe.HelperLine{Begin: name}) }

func (w *writer) step(s probe.Step) bool {
	w.line(probe.HelperLine{Step: &s})
	return s.OK
}

// call records an API call that returns a result code.
func (w *writer) call(name string, dev *int, code int32, value string) bool {
	c := int(code)
	return w.step(probe.Step{Name: name, Device: dev, Code: &c, Value: value, OK: code == 0})
}

// open dlopens a library by its soname, as an application would, and
// resolves the symbols into the function pointers given.
func (w *writer) open(soname string, syms map[string]any) (ok bool) {
	w.begin("dlopen")
	h, err := purego.Dlopen(soname, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return w.step(probe.Step{Name: "dlopen", Value: soname, Error: err.Error()})
	}
	if p := mappedFile(soname); p != "" {
		w.line(probe.HelperLine{Loaded: p})
	}
	if !w.step(probe.Step{Name: "dlopen", Value: soname, OK: true}) {
		return false
	}
	var missing []string
	for name, fp := range syms {
		sym, err := purego.Dlsym(h, name)
		if err != nil || sym == 0 {
			missing = append(missing, name)
			continue
		}
		purego.RegisterFunc(fp, sym)
	}
	if len(missing) > 0 {
		return w.step(probe.Step{Name: "dlsym", Error: "missing symbols: " + strings.Join(slices.Sorted(slices.Values(missing)), ", ")})
	}
	return true
}

// mappedFile is the file the loader mapped for a library, from
// /proc/self/maps (the soname is usually a link to a versioned file,
// libcuda.so.1 -> libcuda.so.570.86.10).
func mappedFile(soname string) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	stem := strings.TrimSuffix(soname, filepath.Ext(soname)) // libcuda.so
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		p := fields[len(fields)-1]
		if strings.HasPrefix(filepath.Base(p), stem) {
			return p
		}
	}
	return ""
}

// NVML, from nvml.h: every function returns an nvmlReturn_t (a C enum,
// int-sized).
func probeNVML(w *writer) {
	var (
		nvmlInitV2                 func() int32
		nvmlShutdown               func() int32
		nvmlDeviceGetCountV2       func(count *uint32) int32
		nvmlSystemGetDriverVersion func(version *byte, length uint32) int32
	)
	if !w.open(probe.LibNVML, map[string]any{
		"nvmlInit_v2": &nvmlInitV2, "nvmlShutdown": &nvmlShutdown,
		"nvmlDeviceGetCount_v2": &nvmlDeviceGetCountV2, "nvmlSystemGetDriverVersion": &nvmlSystemGetDriverVersion,
	}) {
		return
	}
	w.begin("nvmlInit_v2")
	if !w.call("nvmlInit_v2", nil, nvmlInitV2(), "") {
		return
	}
	defer func() {
		w.begin("nvmlShutdown")
		w.call("nvmlShutdown", nil, nvmlShutdown(), "")
	}()
	// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80.
	buf := make([]byte, 80)
	w.begin("nvmlSystemGetDriverVersion")
	w.call("nvmlSystemGetDriverVersion", nil, nvmlSystemGetDriverVersion(&buf[0], uint32(len(buf))), cstr(buf))
	var n uint32
	w.begin("nvmlDeviceGetCount_v2")
	rc := nvmlDeviceGetCountV2(&n)
	if rc == 0 && n == 0 {
		c := 0
		w.step(probe.Step{Name: "nvmlDeviceGetCount_v2", Code: &c, Value: "0", Error: "NVML sees no GPU"})
		return
	}
	w.call("nvmlDeviceGetCount_v2", nil, rc, strconv.FormatUint(uint64(n), 10))
}

// The CUDA driver API, from cuda.h: CUresult is an int-sized enum,
// CUdevice an int, CUcontext a pointer, CUdeviceptr an unsigned long long
// on 64-bit ABIs. The _v2 entry points are the ones cuda.h's macros have
// named since CUDA 3.2 (cuCtxCreate -> cuCtxCreate_v2, cuMemAlloc ->
// cuMemAlloc_v2, ...); every later driver still exports them.
func probeCUDA(w *writer, maxDevices int) {
	var (
		cuInit             func(flags uint32) int32
		cuDriverGetVersion func(v *int32) int32
		cuDeviceGetCount   func(n *int32) int32
		cuDeviceGet        func(d *int32, ordinal int32) int32
		cuDeviceGetName    func(name *byte, length int32, d int32) int32
		cuCtxCreate        func(ctx *uintptr, flags uint32, d int32) int32
		cuCtxDestroy       func(ctx uintptr) int32
		cuMemAlloc         func(dptr *uint64, size uintptr) int32
		cuMemFree          func(dptr uint64) int32
		cuMemcpyHtoD       func(dst uint64, src unsafe.Pointer, n uintptr) int32
		cuMemcpyDtoH       func(dst unsafe.Pointer, src uint64, n uintptr) int32
	)
	if !w.open(probe.LibCUDA, map[string]any{
		"cuInit": &cuInit, "cuDriverGetVersion": &cuDriverGetVersion, "cuDeviceGetCount": &cuDeviceGetCount,
		"cuDeviceGet": &cuDeviceGet, "cuDeviceGetName": &cuDeviceGetName,
		"cuCtxCreate_v2": &cuCtxCreate, "cuCtxDestroy_v2": &cuCtxDestroy,
		"cuMemAlloc_v2": &cuMemAlloc, "cuMemFree_v2": &cuMemFree,
		"cuMemcpyHtoD_v2": &cuMemcpyHtoD, "cuMemcpyDtoH_v2": &cuMemcpyDtoH,
	}) {
		return
	}
	w.begin("cuInit")
	if !w.call("cuInit", nil, cuInit(0), "") {
		return
	}
	var ver int32
	w.begin("cuDriverGetVersion")
	rc := cuDriverGetVersion(&ver)
	w.call("cuDriverGetVersion", nil, rc, fmt.Sprintf("%d.%d", ver/1000, ver%1000/10))
	var n int32
	w.begin("cuDeviceGetCount")
	rc = cuDeviceGetCount(&n)
	if rc == 0 && n == 0 {
		c := 0
		w.step(probe.Step{Name: "cuDeviceGetCount", Code: &c, Value: "0", Error: "no device"})
		return
	}
	if !w.call("cuDeviceGetCount", nil, rc, strconv.Itoa(int(n))) {
		return
	}
	const size = 1 << 20
	src, back := pattern(size), make([]byte, size)
	for i := 0; i < int(n) && i < maxDevices; i++ {
		dev := i
		d := &dev
		var cu int32
		w.begin("cuDeviceGet")
		if !w.call("cuDeviceGet", d, cuDeviceGet(&cu, int32(i)), "") {
			continue
		}
		name := make([]byte, 256)
		w.begin("cuDeviceGetName")
		rc := cuDeviceGetName(&name[0], int32(len(name)), cu)
		w.call("cuDeviceGetName", d, rc, cstr(name))
		var ctx uintptr
		w.begin("cuCtxCreate_v2")
		if !w.call("cuCtxCreate_v2", d, cuCtxCreate(&ctx, 0, cu), "") {
			continue
		}
		func() {
			defer func() {
				w.begin("cuCtxDestroy_v2")
				w.call("cuCtxDestroy_v2", d, cuCtxDestroy(ctx), "")
			}()
			var dptr uint64
			w.begin("cuMemAlloc_v2")
			if !w.call("cuMemAlloc_v2", d, cuMemAlloc(&dptr, size), "1 MiB") {
				return
			}
			defer func() {
				w.begin("cuMemFree_v2")
				w.call("cuMemFree_v2", d, cuMemFree(dptr), "")
			}()
			clear(back)
			w.begin("cuMemcpyHtoD_v2")
			rc := cuMemcpyHtoD(dptr, unsafe.Pointer(&src[0]), size)
			runtime.KeepAlive(src)
			if !w.call("cuMemcpyHtoD_v2", d, rc, "1 MiB") {
				return
			}
			w.begin("cuMemcpyDtoH_v2")
			rc = cuMemcpyDtoH(unsafe.Pointer(&back[0]), dptr, size)
			runtime.KeepAlive(back)
			if !w.call("cuMemcpyDtoH_v2", d, rc, "1 MiB") {
				return
			}
			w.step(compare(d, src, back))
		}()
	}
}

// pattern is a buffer no byte of which is predictable from its
// neighbours (xorshift32), so that a copy that drops, repeats or shifts
// pages shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(0x9e3779b9)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func compare(d *int, want, got []byte) probe.Step {
	s := probe.Step{Name: "compare", Device: d, Value: fmt.Sprintf("%d bytes", len(want))}
	if bytes.Equal(want, got) {
		s.OK = true
		return s
	}
	first, n := -1, 0
	for i := range want {
		if want[i] != got[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	s.Error = fmt.Sprintf("%d of %d bytes differ, the first at offset %d (wrote %#02x, read back %#02x)", n, len(want), first, want[first], got[first])
	return s
}

func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}
