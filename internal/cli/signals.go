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

	"golang.org/x/sys/unix"
)

// Run is the program: Main with the process's signals handled. It returns
// the exit status.
//
// A signal ends every command the same way: SIGINT or SIGTERM N ends the
// run with exit status 128+N (130, 143) once what it made is removed.
// How the run gets there depends on what it holds:
//
//   - Diagnosis commands hold nothing worth finishing, only temporary
//     files (an unpacked snapshot, a snapshot being written): the handler
//     removes them and exits at once, whatever the command was doing,
//     even blocked writing to a pipe nobody reads.
//   - Commands that own something that must be ended in order (the
//     sandbox's cgroup and its command, the processes of probe and
//     container --probe, plugin test's kubelet.sock, the claims plugin
//     test --dra prepared) take the signal as their context's end
//     (takeCancel): the cause is Interrupted, naming the signal; they
//     stop, clean up, report nothing (work cut short judges nothing), and
//     the run then exits 128+N.
//   - The daemons (agent, plugin serve, plugin mock, with --dra too) take
//     it as their normal stop (takeStop): they clean up and exit with
//     their own status, 0. So does the hand-over to another binary when
//     it runs as a child (in tests): the signal is passed on, and the
//     child's status is the run's. (From a command line the hand-over
//     is an exec: the other binary is the process, and these rules are
//     its own.)
//
// A second signal does not wait: it ends the process at once (128+N)
// after the temporary files are removed. The exit status is decided in
// one place: a signal caught before the run is over makes it 128+N, on
// whichever goroutine the process ends (the handler's exit, or Run's
// return once the command has seen its context end); one caught after is
// ignored. The cleanups run once, and a second caller waits for the
// first, so neither way out can end the process with a cleanup half done.
//
// SIGPIPE is caught too, so that `accel-doctor check | head -1` turns the
// write error into a clean exit (141) after the same cleanup instead of
// dying with the files still there; so is a panic.
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
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s := &runSignals{cancel: cancel, c: make(chan os.Signal, 2)}
	prev := thisRun.Swap(s)
	defer func() {
		thisRun.Store(prev)
		s.stop()
	}()
	code := protect(stderr, func() int { return mainWith(ctx, args, stdout, stderr, ext) })
	if n, ok := s.end(); ok {
		return 128 + n
	}
	return code
}

// Interrupted is the cause (context.Cause) of a run's context cancelled by
// a signal. The sandbox passes Signal on to its command.
type Interrupted struct{ Sig syscall.Signal }

func (e Interrupted) Error() string          { return "interrupted by " + unix.SignalName(e.Sig) }
func (e Interrupted) Signal() syscall.Signal { return e.Sig }

// stopMode is how the running command takes SIGINT and SIGTERM (Run).
type stopMode int32

const (
	stopAtOnce   stopMode = iota // the handler removes the temporary files and exits 128+N
	stopByCancel                 // takeCancel: the command ends through its context, then 128+N
	stopNormally                 // takeStop: the command ends through its context with its own status
)

// runSignals is one run's handling of its signals.
type runSignals struct {
	mu     sync.Mutex
	caught bool           // signal.Notify was called
	over   bool           // the run has returned: a signal now changes nothing
	first  syscall.Signal // the first SIGINT or SIGTERM caught
	mode   stopMode
	cancel context.CancelCauseFunc
	c      chan os.Signal
}

// thisRun is the run under way (nil outside Run: a test calling a
// command's code directly).
var thisRun atomic.Pointer[runSignals]

// catchSignals makes the run under way catch SIGINT, SIGTERM and SIGPIPE
// (Run says what it does with them) until it returns. Whatever leaves
// something to clean up calls it first (atExit, makeTemp, the unpacking of
// a snapshot), and so does a command that takes the cancel.
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
	go s.onSignals()
}

func (s *runSignals) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caught {
		signal.Stop(s.c)
	}
}

// end marks the run over and returns the signal that ended it, if one
// was caught before and the command does not make its own status of it.
func (s *runSignals) end() (signo int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over = true
	return s.ended()
}

// ended is end without marking the run over; s.mu is held.
func (s *runSignals) ended() (signo int, ok bool) {
	return int(s.first), s.first != 0 && s.mode != stopNormally
}

// interrupted reports the signal that is ending the run under way, for
// exitCode (nil run: not interrupted).
func interrupted() (signo int, mode stopMode, ok bool) {
	s := thisRun.Load()
	if s == nil {
		return 0, 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	signo, ok = s.ended()
	return signo, s.mode, ok
}

// takeCancel says the running command ends by itself on SIGTERM or SIGINT
// (its context is cancelled, the cause Interrupted) and cleans up; the
// run then exits 128+N.
func takeCancel() { takeSignals(stopByCancel) }

// takeStop says SIGTERM and SIGINT are the running command's normal stop
// (its context is cancelled): it ends with its own exit status (a daemon:
// 0).
func takeStop() { takeSignals(stopNormally) }

func takeSignals(m stopMode) {
	if s := thisRun.Load(); s != nil {
		s.mu.Lock()
		s.mode = m
		s.mu.Unlock()
	}
	catchSignals()
}

// signalOf is the signal that cancelled ctx (Interrupted), else SIGTERM.
func signalOf(ctx context.Context) syscall.Signal {
	var in Interrupted
	if errors.As(context.Cause(ctx), &in) {
		return in.Sig
	}
	return syscall.SIGTERM
}

// protect runs fn and then the cleanups, on a panic too (which it reports
// and turns into exit 2).
func protect(stderr io.Writer, fn func() int) (code int) {
	defer func() {
		if p := recover(); p != nil {
			runCleanups(false)
			fmt.Fprintf(stderr, "accel-doctor: internal error: %v\n%s", p, debug.Stack())
			code = 2
		}
	}()
	code = fn()
	runCleanups(false)
	return code
}

func (s *runSignals) onSignals() {
	for sig := range s.c {
		if sig == syscall.SIGPIPE {
			// The write that raised it returns EPIPE; Main turns that into
			// exit 141.
			continue
		}
		n := sig.(syscall.Signal)
		s.mu.Lock()
		if s.over {
			// Run has returned its status; the process is exiting with it.
			s.mu.Unlock()
			continue
		}
		first := s.first == 0
		if first {
			s.first = n
		}
		mode := s.mode
		s.mu.Unlock()
		s.cancel(Interrupted{n})
		if first && mode != stopAtOnce {
			// The command stops by itself; a second signal does not wait
			// for it.
			continue
		}
		runCleanups(true)
		os.Exit(128 + int(n))
	}
}

// The process-wide list of temporary things to remove on every exit path.
var cleanups struct {
	mu     sync.Mutex // guards fns and closed
	run    sync.Mutex // held while they run: a second caller waits for the first
	fns    []func()
	closed bool // the process is exiting on a signal: nothing more is made
}

// errExiting refuses to make a temporary file once the process is exiting
// on a signal (its removal would not run).
var errExiting = errors.New("interrupted: the process is exiting")

// atExit registers fn to run once when the process ends: normally, on a
// signal or on a panic. The returned function runs it now (and only once).
// Once the process is exiting on a signal, fn runs at once.
func atExit(fn func()) (runNow func()) {
	catchSignals()
	once := sync.OnceFunc(fn)
	cleanups.mu.Lock()
	closed := cleanups.closed
	if !closed {
		cleanups.fns = append(cleanups.fns, once)
	}
	cleanups.mu.Unlock()
	if closed {
		once()
	}
	return once
}

// makeTemp makes something temporary and registers its removal in one
// step: no signal can come between the two and leave it behind. Once the
// process is exiting on a signal it makes nothing (errExiting). The
// returned function removes it now (and only once).
func makeTemp(make func() (remove func(), err error)) (removeNow func(), err error) {
	catchSignals()
	cleanups.mu.Lock()
	defer cleanups.mu.Unlock()
	if cleanups.closed {
		return nil, errExiting
	}
	remove, err := make()
	if err != nil {
		return nil, err
	}
	once := sync.OnceFunc(remove)
	cleanups.fns = append(cleanups.fns, once)
	return once, nil
}

// runCleanups removes every temporary thing; final, on the way out after
// a signal, also makes sure nothing more is made.
func runCleanups(final bool) {
	if final {
		cleanups.mu.Lock()
		cleanups.closed = true
		cleanups.mu.Unlock()
	}
	cleanups.run.Lock()
	defer cleanups.run.Unlock()
	cleanups.mu.Lock()
	fns := cleanups.fns
	cleanups.fns = nil
	cleanups.mu.Unlock()
	for _, f := range fns {
		f()
	}
	removeUnpacked(final)
}

// interruptionOnly reports whether err says only that the run was
// interrupted (a cancelled context), nothing a user must be told: a
// cleanup that failed is told.
func interruptionOnly(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !interruptionOnly(e) {
				return false
			}
		}
		return true
	}
	var in Interrupted
	return errors.Is(err, context.Canceled) || errors.As(err, &in)
}

// isBrokenPipe reports a write to a closed pipe (the reader of our output
// went away: `| head`).
func isBrokenPipe(err error) bool { return errors.Is(err, syscall.EPIPE) }
