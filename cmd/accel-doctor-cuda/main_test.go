package main

// These tests run the built helper (CGO_ENABLED=0, as it ships) against
// stand-in driver libraries compiled here from C with the system compiler:
// they exercise the real dlopen, symbol lookup, calling convention, result
// codes, the copy check and the timeout, through probe.RunHelper. They do
// not stand for a GPU; bench/gpu-probe.sh runs the helper against the
// real driver on a machine that has one.

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

// helperBin is the helper built as it ships (CGO_ENABLED=0), by
// internal/testbin once for the whole run.
func helperBin(t testing.TB) string {
	t.Helper()
	return filepath.Join(testbin.Dir(t, "../..", testbin.Options{Static: true, Packages: []string{"./cmd/accel-doctor-cuda"}}), probe.HelperName)
}

// TestHelperIsDynamicWithoutCgo holds what the design rests on: purego
// without cgo gives a dynamically linked executable (so that it can
// dlopen glibc libraries), built with CGO_ENABLED=0.
func TestHelperIsDynamicWithoutCgo(t *testing.T) {
	f, err := elf.Open(helperBin(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	interp := false
	for _, p := range f.Progs {
		interp = interp || p.Type == elf.PT_INTERP
	}
	libs, _ := f.ImportedLibraries()
	if !interp || !strings.Contains(strings.Join(libs, " "), "libc.so.6") {
		t.Errorf("PT_INTERP %v, DT_NEEDED %v: want a dynamically linked helper", interp, libs)
	}
}

const fakeCUDA = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
static int inited;
CUresult cuInit(unsigned int flags) {
#ifdef FAKE_HANG
	sleep(600);
#endif
#ifdef FAKE_INIT
	return FAKE_INIT;
#endif
	inited = 1;
	return 0;
}
#ifndef FAKE_STUB
CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuDeviceGetCount(int *n) { if (!inited) return 3; *n = FAKE_DEVICES; return 0; }
CUresult cuDeviceGet(CUdevice *d, int o) { if (o < 0 || o >= FAKE_DEVICES) return 101; *d = o; return 0; }
CUresult cuDeviceGetName(char *n, int len, CUdevice d) { snprintf(n, len, "Fake GPU %d", d); return 0; }
CUresult cuCtxCreate_v2(CUcontext *c, unsigned int f, CUdevice d) { *c = malloc(1); return 0; }
CUresult cuCtxDestroy_v2(CUcontext c) { free(c); return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { void *m = malloc(n); if (!m) return 2; *p = (CUdeviceptr)m; return 0; }
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) {
	memcpy(d, (void *)s, n);
#ifdef FAKE_CORRUPT
	((unsigned char *)d)[4097] ^= 0xff;
#endif
	return 0;
}
#endif
`

const fakeNVML = `
#include <stdio.h>
int nvmlInit_v2(void) { return FAKE_NVML_INIT; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 2; return 0; }
int nvmlSystemGetDriverVersion(char *v, unsigned int len) { snprintf(v, len, "570.86.10"); return 0; }
`

// fakeLib compiles src into dir/soname with the given -D definitions.
func fakeLib(t *testing.T, dir, soname, src string, defs ...string) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the stand-in driver libraries")
	}
	c := filepath.Join(t.TempDir(), "fake.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-shared", "-fPIC", "-o", filepath.Join(dir, soname), "-Wl,-soname," + soname, c}
	for _, d := range defs {
		args = append(args, "-D"+d)
	}
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
}

func runHelper(t *testing.T, libDir string, timeout time.Duration, libs ...*probe.LibProbe) {
	t.Helper()
	bin := helperBin(t)
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := append(os.Environ(), "LD_LIBRARY_PATH="+libDir)
	probe.RunHelper(context.Background(), probe.Helper{File: f, Path: bin, Timeout: timeout, Env: env}, libs)
}

func steps(l *probe.LibProbe) string {
	var b []string
	for _, s := range l.Steps {
		v := s.Name
		if s.Device != nil {
			v = fmt.Sprintf("%s[%d]", v, *s.Device)
		}
		if !s.OK {
			v += "!"
			if s.CodeName != "" {
				v += s.CodeName
			}
		}
		b = append(b, v)
	}
	return strings.Join(b, " ")
}

func TestHealthyFake(t *testing.T) {
	dir := t.TempDir()
	fakeLib(t, dir, probe.LibCUDA, fakeCUDA, "FAKE_DEVICES=2")
	fakeLib(t, dir, probe.LibNVML, fakeNVML, "FAKE_NVML_INIT=0")
	cuda := &probe.LibProbe{Lib: probe.HelperCUDA, Library: probe.LibCUDA}
	nvml := &probe.LibProbe{Lib: probe.HelperNVML, Library: probe.LibNVML}
	runHelper(t, dir, 0, nvml, cuda)
	perDev := func(i int) string {
		return strings.ReplaceAll("cuDeviceGet[#] cuDeviceGetName[#] cuCtxCreate_v2[#] cuMemAlloc_v2[#] cuMemcpyHtoD_v2[#] cuMemcpyDtoH_v2[#] compare[#] cuMemFree_v2[#] cuCtxDestroy_v2[#]", "#", fmt.Sprint(i))
	}
	want := "dlopen cuInit cuDriverGetVersion cuDeviceGetCount " + perDev(0) + " " + perDev(1)
	if got := steps(cuda); got != want || !cuda.Done || cuda.Error != "" || cuda.FirstFailure() != nil {
		t.Errorf("cuda steps:\n got %s\nwant %s\n%+v", got, want, cuda)
	}
	if cuda.Loaded != filepath.Join(dir, probe.LibCUDA) {
		t.Errorf("loaded %q", cuda.Loaded)
	}
	if got := steps(nvml); got != "dlopen nvmlInit_v2 nvmlSystemGetDriverVersion nvmlDeviceGetCount_v2 nvmlShutdown" || !nvml.Done {
		t.Errorf("nvml steps %s (%+v)", got, nvml)
	}
	for _, s := range cuda.Steps {
		if s.Name == "cuDeviceGetName" && s.Value != fmt.Sprintf("Fake GPU %d", *s.Device) {
			t.Errorf("device name %q", s.Value)
		}
		if s.Name == "cuDriverGetVersion" && s.Value != "12.8" {
			t.Errorf("driver version %q", s.Value)
		}
	}
}

func TestFailingFakes(t *testing.T) {
	for _, c := range []struct {
		name    string
		defs    []string
		want    string // the steps
		failure string // the first failing step's name and code name or error
	}{
		{"no device", []string{"FAKE_DEVICES=2", "FAKE_INIT=100"}, "dlopen cuInit!CUDA_ERROR_NO_DEVICE", "cuInit CUDA_ERROR_NO_DEVICE"},
		{"zero devices", []string{"FAKE_DEVICES=0"}, "dlopen cuInit cuDriverGetVersion cuDeviceGetCount!CUDA_SUCCESS", "cuDeviceGetCount no device"},
		{"mismatch", []string{"FAKE_DEVICES=1", "FAKE_INIT=803"}, "dlopen cuInit!CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "cuInit CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
		{"corrupting copy", []string{"FAKE_DEVICES=1", "FAKE_CORRUPT"},
			"dlopen cuInit cuDriverGetVersion cuDeviceGetCount cuDeviceGet[0] cuDeviceGetName[0] cuCtxCreate_v2[0] cuMemAlloc_v2[0] cuMemcpyHtoD_v2[0] cuMemcpyDtoH_v2[0] compare[0]! cuMemFree_v2[0] cuCtxDestroy_v2[0]",
			"compare 1 of 1048576 bytes differ, the first at offset 4097"},
		{"stub library", []string{"FAKE_STUB"}, "dlopen dlsym!", "dlsym missing symbols: cuCtxCreate_v2, cuCtxDestroy_v2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fakeLib(t, dir, probe.LibCUDA, fakeCUDA, c.defs...)
			cuda := &probe.LibProbe{Lib: probe.HelperCUDA, Library: probe.LibCUDA}
			runHelper(t, dir, 0, cuda)
			if got := steps(cuda); got != c.want {
				t.Errorf("steps\n got %s\nwant %s", got, c.want)
			}
			f := cuda.FirstFailure()
			if f == nil {
				t.Fatal("no failing step")
			}
			got := f.Name + " " + f.CodeName
			if f.Error != "" {
				got = f.Name + " " + f.Error
			}
			if !strings.HasPrefix(got, c.failure) {
				t.Errorf("first failure %q, want %q", got, c.failure)
			}
			if !cuda.Done || cuda.Error != "" {
				t.Errorf("done %v, error %q", cuda.Done, cuda.Error)
			}
		})
	}
}

// TestNVMLBlocked: NVML_ERROR_OPERATING_SYSTEM is named and ends the
// steps.
func TestNVMLBlocked(t *testing.T) {
	dir := t.TempDir()
	fakeLib(t, dir, probe.LibNVML, fakeNVML, "FAKE_NVML_INIT=17")
	nvml := &probe.LibProbe{Lib: probe.HelperNVML, Library: probe.LibNVML}
	runHelper(t, dir, 0, nvml)
	if got := steps(nvml); got != "dlopen nvmlInit_v2!NVML_ERROR_OPERATING_SYSTEM" {
		t.Errorf("steps %s", got)
	}
	rc := probe.LookupResult(probe.NVMLResults, 17, "nvmlReturn_t")
	if !strings.Contains(rc.Cause, "cgroup") {
		t.Errorf("cause of 17: %q", rc.Cause)
	}
}

// TestHungInit: a cuInit that never returns is killed at the timeout
// and named as the unfinished step.
func TestHungInit(t *testing.T) {
	dir := t.TempDir()
	fakeLib(t, dir, probe.LibCUDA, fakeCUDA, "FAKE_DEVICES=1", "FAKE_HANG")
	cuda := &probe.LibProbe{Lib: probe.HelperCUDA, Library: probe.LibCUDA}
	start := time.Now()
	runHelper(t, dir, time.Second, cuda)
	if !cuda.TimedOut || cuda.Unfinished != "cuInit" || cuda.Done || !strings.Contains(cuda.Error, "killed after 1s") {
		t.Errorf("%+v", cuda)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the kill took %s", d)
	}
}

// TestNotALibrary: a file of the right name that the loader refuses
// gives the loader's own words.
func TestNotALibrary(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, probe.LibCUDA), []byte("garbage"), 0o644)
	cuda := &probe.LibProbe{Lib: probe.HelperCUDA, Library: probe.LibCUDA}
	runHelper(t, dir, 0, cuda)
	f := cuda.FirstFailure()
	if f == nil || f.Name != "dlopen" || !strings.Contains(f.Error, "libcuda.so.1") {
		t.Errorf("%+v", cuda)
	}
}

// TestRunEndToEnd: probe.Run finds the stand-in libraries through
// LD_LIBRARY_PATH, runs this helper and reports both.
func TestRunEndToEnd(t *testing.T) {
	dir := t.TempDir()
	fakeLib(t, dir, probe.LibCUDA, fakeCUDA, "FAKE_DEVICES=1")
	fakeLib(t, dir, probe.LibNVML, fakeNVML, "FAKE_NVML_INIT=0")
	r := probe.Run(context.Background(), probe.Options{
		Dev: t.TempDir(), HelperPath: helperBin(t),
		Env: append(os.Environ(), "LD_LIBRARY_PATH="+dir),
	})
	for _, l := range []probe.LibProbe{r.CUDA, r.NVML} {
		if l.NotRun != "" || !l.Done || l.FirstFailure() != nil || l.Search == nil || l.Search.Found != filepath.Join(dir, l.Library) {
			t.Errorf("%s: %+v", l.Library, l)
		}
	}
	// Without the helper: NOT_RUN, naming where it was looked for.
	r = probe.Run(context.Background(), probe.Options{
		Dev: t.TempDir(), HelperPath: filepath.Join(dir, "absent-helper"),
		Env: append(os.Environ(), "LD_LIBRARY_PATH="+dir),
	})
	if !strings.Contains(r.CUDA.NotRun, "absent-helper") || !strings.Contains(r.CUDA.NotRun, "static binary") {
		t.Errorf("no helper: %q", r.CUDA.NotRun)
	}
}
