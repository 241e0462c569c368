package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The CUDA and NVML steps need the driver's user-space libraries, which
// are glibc shared objects: only a dynamically linked process can load
// them (dlopen lives in the loader, ld-linux, which a static binary does
// not have). accel-doctor is static so that it runs in any image, a
// scratch one included; it hands those steps to a small companion,
// cmd/accel-doctor-cuda, built with purego (CGO_ENABLED=0 still, but the
// linker gives it a PT_INTERP and DT_NEEDED libc.so.6, libdl.so.2,
// libpthread.so.0, so it starts only where a glibc loader exists). The
// probe runs the helper only when the library is there to load, after
// checking that the helper's loader is there too, and reads its answers
// as JSON lines on a pipe.
const (
	LibCUDA = "libcuda.so.1"
	LibNVML = "libnvidia-ml.so.1"
	// HelperName is the companion's file name, looked for beside the
	// accel-doctor executable.
	HelperName = "accel-doctor-cuda"
	// DefaultHelperTimeout bounds the whole helper run: cuInit on eight
	// GPUs without persistence mode takes seconds, a hung driver forever.
	DefaultHelperTimeout = 60 * time.Second
)

// The libraries' short names, as the helper's --lib flag and HelperLine
// take them.
const (
	HelperCUDA = "cuda"
	HelperNVML = "nvml"
)

// Step is one call the helper made.
type Step struct {
	Name   string `json:"name"` // "dlopen", "cuInit", "cuMemcpyDtoH_v2", "compare"
	Device *int   `json:"device,omitempty"`
	// Code is the call's result (a CUresult or an nvmlReturn_t); nil for
	// a step that is not an API call (dlopen, dlsym, the comparison).
	Code *int `json:"code,omitempty"`
	// CodeName is the code's enum name, filled in from CUDAResults or
	// NVMLResults by the probe (the helper sends the number only).
	CodeName string `json:"code_name,omitempty"`
	Value    string `json:"value,omitempty"` // what it returned: a count, a name, a version
	Error    string `json:"error,omitempty"` // dlerror's text, a missing symbol, the first differing byte
	OK       bool   `json:"ok"`
}

// Skip is why a step was not made, typed (LibProbe.Skip, Ioctl.Skip):
// the fix follows from it. It is JSON, as the probe's report is (the
// host-side container --probe reads it back from inside the container).
type Skip string

const (
	// SkipNotAsked: turned off (--no-libraries).
	SkipNotAsked Skip = "not-asked"
	// SkipNoLibrary: the library is in no place the loader searches.
	SkipNoLibrary Skip = "no-library"
	// SkipNoHelper: the helper that loads it (HelperName) is not there.
	SkipNoHelper Skip = "no-helper"
	// SkipHelperUnusable: the helper is there and could not be run.
	SkipHelperUnusable Skip = "helper-unusable"
	// SkipHelperUntrusted: the helper is there and is not run: someone
	// other than root or this user could change it (internal/helper).
	SkipHelperUntrusted Skip = "helper-untrusted"
	// SkipNoLoader: this file system has no glibc dynamic loader, so no
	// glibc program runs here.
	SkipNoLoader Skip = "no-loader"
	// SkipOpenFailed: the open before the ioctl failed.
	SkipOpenFailed Skip = "open-failed"
	// SkipNotChar: the node is not a character device.
	SkipNotChar Skip = "not-char"
	// SkipArch: this architecture's ioctl encoding is not carried.
	SkipArch Skip = "arch"
	// SkipByDesign: the kind is probed otherwise (the NVIDIA ioctls are
	// the library steps' to make).
	SkipByDesign Skip = "by-design"
)

// HelperLine is one line the helper writes on its stdout.
type HelperLine struct {
	Lib    string `json:"lib"`              // HelperCUDA or HelperNVML
	Begin  string `json:"begin,omitempty"`  // a step is about to be called
	Step   *Step  `json:"step,omitempty"`   // a step returned
	Loaded string `json:"loaded,omitempty"` // the file the loader mapped for the library
	Done   bool   `json:"done,omitempty"`   // the library's steps are over
}

// LibProbe is what became of one library's steps.
type LibProbe struct {
	Lib     string     `json:"lib"`     // HelperCUDA or HelperNVML
	Library string     `json:"library"` // LibCUDA or LibNVML
	Search  *LibSearch `json:"search,omitempty"`
	// NotRun is why the steps could not run; nothing else is set then.
	// Skip is the same, typed: what the fix follows from.
	NotRun string `json:"not_run,omitempty"`
	Skip   Skip   `json:"skip,omitempty"`
	Helper string `json:"helper,omitempty"` // the helper executed (or refused: SkipHelperUntrusted)
	Loaded string `json:"loaded,omitempty"`
	Steps  []Step `json:"steps,omitempty"`
	// Done: the helper finished this library's steps (whatever they gave).
	Done bool `json:"done"`
	// Unfinished is the step that had begun and never returned: the
	// helper was killed at the timeout, or died in it.
	Unfinished string `json:"unfinished,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	// Error is why the helper's run is incomplete: its exit status or
	// signal, a garbled line, the tail of its stderr.
	Error string `json:"error,omitempty"`
}

// FirstFailure is the first step that did not succeed, nil when none.
func (l *LibProbe) FirstFailure() *Step {
	for i := range l.Steps {
		if !l.Steps[i].OK {
			return &l.Steps[i]
		}
	}
	return nil
}

// maxHelperOutput bounds what is read from the helper.
const (
	maxHelperLine  = 64 << 10
	maxHelperLines = 4096
)

// ParseHelperOutput reads the helper's JSON lines into the libraries it
// was asked about (by Lib). A line for a library not asked about, or that
// is not JSON, is an error; reading stops at the first.
func ParseHelperOutput(r io.Reader, libs map[string]*LibProbe) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxHelperLine)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if n++; n > maxHelperLines {
			return fmt.Errorf("more than %d lines", maxHelperLines)
		}
		var hl HelperLine
		if err := json.Unmarshal(line, &hl); err != nil {
			return fmt.Errorf("line %d: %v", n, err)
		}
		l, ok := libs[hl.Lib]
		if !ok {
			return fmt.Errorf("line %d: library %q was not asked for", n, hl.Lib)
		}
		switch {
		case hl.Begin != "":
			l.Unfinished = hl.Begin
		case hl.Step != nil:
			s := *hl.Step
			if s.Code != nil {
				table, enum := CUDAResults, "CUresult"
				if l.Lib == HelperNVML {
					table, enum = NVMLResults, "nvmlReturn_t"
				}
				s.CodeName = LookupResult(table, *s.Code, enum).Name
			}
			l.Steps = append(l.Steps, s)
			l.Unfinished = ""
		case hl.Loaded != "":
			l.Loaded = hl.Loaded
		case hl.Done:
			l.Done = true
			l.Unfinished = ""
		}
	}
	return sc.Err()
}

// Helper is the companion to run.
type Helper struct {
	// File is the helper, open for reading: its PT_INTERP is read from
	// it, and with PassFD it is what runs.
	File *os.File
	// Path is the helper's path, for the report and, without PassFD,
	// for exec.
	Path string
	// PassFD runs the helper from File (passed as fd 3, executed as
	// /proc/self/fd/3) instead of by Path: the host-side probe opened it
	// before it entered the container, whose file system does not have
	// it. It needs a procfs at /proc that shows the calling process
	// (the container's, with its PID namespace joined).
	PassFD bool
	// Timeout bounds the run (DefaultHelperTimeout when 0).
	Timeout time.Duration
	// Env is the helper's environment (os.Environ() when nil): the
	// libraries read CUDA_VISIBLE_DEVICES and the like from it.
	Env []string
}

// RunHelper runs the helper for the libraries given (those whose search
// found a file) and fills their steps in. It is made from the calling
// goroutine's OS thread (exec.Cmd forks from it), so a caller that
// locked the thread and changed its credentials, root or namespaces runs
// the helper with them.
func RunHelper(ctx context.Context, h Helper, libs []*LibProbe) {
	if len(libs) == 0 {
		return
	}
	notRun := func(skip Skip, why string) {
		for _, l := range libs {
			l.NotRun, l.Skip = why, skip
		}
	}
	interp, err := ProgramInterpreter(h.File)
	if err != nil {
		notRun(SkipHelperUnusable, fmt.Sprintf("the helper %s is not a readable executable: %v", h.Path, err))
		return
	}
	if interp != "" {
		if _, err := os.Stat(interp); err != nil {
			notRun(SkipNoLoader, fmt.Sprintf("the helper needs the dynamic loader %s, which this file system does not have (%v): no glibc program, and so no %s, can be loaded here", interp, errors.Unwrap(err), libs[0].Library))
			return
		}
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultHelperTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var args []string
	by := map[string]*LibProbe{}
	for _, l := range libs {
		args = append(args, "--lib", l.Lib)
		by[l.Lib] = l
		l.Helper = h.Path
	}
	path := h.Path
	cmd := exec.CommandContext(ctx, path, args...)
	if h.PassFD {
		cmd = exec.CommandContext(ctx, "/proc/self/fd/3", args...)
		cmd.Args[0] = HelperName
		cmd.ExtraFiles = []*os.File{h.File}
	}
	cmd.Env = h.Env
	var stderr tailBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		notRun(SkipHelperUnusable, "helper stdout: "+err.Error())
		return
	}
	// A helper killed at the timeout may leave a grandchild holding the
	// pipe; WaitDelay stops the wait for it.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		notRun(SkipHelperUnusable, fmt.Sprintf("the helper could not be started: %v", err))
		return
	}
	perr := ParseHelperOutput(out, by)
	if perr != nil {
		io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	timedOut := ctx.Err() == context.DeadlineExceeded
	for _, l := range libs {
		var why []string
		switch {
		case timedOut:
			l.TimedOut = true
			why = append(why, fmt.Sprintf("killed after %s", timeout))
		case werr != nil:
			why = append(why, "the helper "+werr.Error())
		}
		if perr != nil {
			why = append(why, "its output: "+perr.Error())
		}
		if len(why) > 0 || !l.Done {
			if !l.Done && len(why) == 0 {
				why = append(why, "the helper ended before it finished "+l.Library)
			}
			if s := strings.TrimSpace(stderr.String()); s != "" {
				why = append(why, "stderr: "+s)
			}
			l.Error = strings.Join(why, "; ")
		}
	}
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
