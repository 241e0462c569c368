package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
)

// Run is the program: Main with the process's signals handled. It returns
// the exit status.
//
// Diagnosis commands hold nothing worth finishing when they are told to
// stop, only temporary files (an unpacked snapshot, a snapshot being
// written): on SIGINT or SIGTERM they are removed and the process exits at
// once with 128+N (130, 143), whatever the command was doing, even blocked
// writing to a pipe nobody reads. The sandbox is the exception: it has a
// cgroup to empty and remove, so it takes the signal as a cancelled
// context and returns through its own cleanup (commands say so with
// takeCancel). SIGPIPE is caught too, so that `accel-doctor check | head
// -1` turns the write error into a clean exit (141) after the same cleanup
// instead of dying with the files still there; so is a panic.
//
// The signals are caught from the moment a run has something to clean up
// or a command takes the cancel (catchSignals), not from the start: a run
// that never has either (check, topo or iommu of a --root, or of the live
// host) keeps the default action of each, which ends it the same way, by
// the signal (a shell shows the same 128+N), with nothing left behind.
// Catching costs a thread for the runtime's signal loop and a handshake
// with it to stop: 0.4 ms of a 5 ms run (bench/run.sh).
func Run(args []string, stdout, stderr io.Writer) int { return RunWith(args, stdout, stderr, nil) }

// RunWith is Run with an Extension (accel-doctor-kube's).
func RunWith(args []string, stdout, stderr io.Writer, ext *Extension) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &runSignals{cancel: cancel, c: make(chan os.Signal, 2)}
	prev := thisRun.Swap(s)
	defer func() {
		thisRun.Store(prev)
		s.stop()
	}()
	return protect(stderr, func() int { return mainWith(ctx, args, stdout, stderr, ext) })
}

// runSignals is one run's handling of its signals.
type runSignals struct {
	mu     sync.Mutex
	caught bool
	cancel context.CancelFunc
	c      chan os.Signal
}

// thisRun is the run under way (nil outside Run: a test calling a
// command's code directly).
var thisRun atomic.Pointer[runSignals]

// catchSignals makes the run under way catch SIGINT, SIGTERM and SIGPIPE
// (Run says what it does with them) until it returns. Whatever leaves
// something to clean up calls it first (atExit, the unpacking of a
// snapshot), and so does a command that takes the cancel.
func catchSignals() {
	s := thisRun.Load()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caught {
		return
	}
	s.caught = true
	signal.Notify(s.c, os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	go onSignals(s.c, s.cancel)
}

func (s *runSignals) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caught {
		signal.Stop(s.c)
	}
}

// takeCancel says the running command ends by itself on SIGTERM or SIGINT
// (its context is cancelled): the signal does not end the process.
func takeCancel() {
	handlesCancel.Store(true)
	catchSignals()
}

// protect runs fn and then the cleanups, on a panic too (which it reports
// and turns into exit 2).
func protect(stderr io.Writer, fn func() int) (code int) {
	defer func() {
		if p := recover(); p != nil {
			runCleanups()
			fmt.Fprintf(stderr, "accel-doctor: internal error: %v\n%s", p, debug.Stack())
			code = 2
		}
	}()
	code = fn()
	runCleanups()
	return code
}

// handlesCancel is set by a command that turns a cancelled context into
// its own orderly cleanup (the sandbox).
var handlesCancel atomic.Bool

func onSignals(sigc <-chan os.Signal, cancel context.CancelFunc) {
	for sig := range sigc {
		if sig == syscall.SIGPIPE {
			// The write that raised it returns EPIPE; Main turns that into
			// exit 141.
			continue
		}
		cancel()
		if handlesCancel.Load() {
			// A second signal does not wait for the sandbox either.
			handlesCancel.Store(false)
			continue
		}
		runCleanups()
		os.Exit(128 + int(sig.(syscall.Signal)))
	}
}

// The process-wide list of temporary things to remove on every exit path.
var cleanups struct {
	mu  sync.Mutex
	fns []func()
}

// atExit registers fn to run once when the process ends: normally, on a
// signal or on a panic. The returned function runs it now (and only once).
func atExit(fn func()) (runNow func()) {
	catchSignals()
	once := sync.OnceFunc(fn)
	cleanups.mu.Lock()
	cleanups.fns = append(cleanups.fns, once)
	cleanups.mu.Unlock()
	return once
}

func runCleanups() {
	cleanups.mu.Lock()
	fns := cleanups.fns
	cleanups.fns = nil
	cleanups.mu.Unlock()
	for _, f := range fns {
		f()
	}
	removeUnpacked()
}

// isBrokenPipe reports a write to a closed pipe (the reader of our output
// went away: `| head`).
func isBrokenPipe(err error) bool { return errors.Is(err, syscall.EPIPE) }
