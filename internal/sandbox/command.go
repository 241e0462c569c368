package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// killOnCancel kills everything in dir, and proc itself, when ctx
// is done before stop is called. proc is killed by pid as well because a
// v1 trampoline may not have joined the cgroup yet: killed by the cgroup
// alone it could join a moment later and start the command after all.
func killOnCancel(ctx context.Context, dir string, v2 bool, proc *os.Process) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			proc.Kill()
			killAll(dir, v2)
		case <-done:
		}
	}()
	return func() { close(done); wg.Wait() }
}

// stopOnCancel stops the command when ctx is done before stop is called,
// the way docker stop and the kubelet stop a container's process: the
// signal that cancelled ctx (stopSignal) is passed on to the command,
// which has grace to exit (to run a handler that flushes and removes its
// files); then everything in dir, and proc itself, is killed
// (killOnCancel says why proc too). The signal goes to the command's
// process, not to every process in the cgroup: a shell or a supervisor
// passes it on to its children as it sees fit; what is left when it
// exits is killed with the cgroup.
func stopOnCancel(ctx context.Context, dir string, v2 bool, proc *os.Process, grace time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		if sig := stopSignal(ctx); sig != unix.SIGINT || !terminalInterrupted() {
			proc.Signal(sig)
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			proc.Kill()
			killAll(dir, v2)
		case <-done:
		}
	}()
	return func() { close(done); wg.Wait() }
}

// stopSignal is the signal to pass on to the command: the one that
// stopped accel-doctor when ctx's cause names it (an error with a method
// Signal() syscall.Signal: internal/cli's Interrupted), else SIGTERM, the
// usual request to stop.
func stopSignal(ctx context.Context) syscall.Signal {
	var s interface{ Signal() syscall.Signal }
	if errors.As(context.Cause(ctx), &s) {
		return s.Signal()
	}
	return unix.SIGTERM
}

// terminalInterrupted reports whether a SIGINT is most likely the
// terminal's ^C: accel-doctor's process group is the foreground group of
// its controlling terminal, and the terminal sends SIGINT to the whole
// group (drivers/tty/n_tty.c isig), where the command is too (it is
// started in accel-doctor's group). The command has it already; passing
// it on would make one ^C two (a second KeyboardInterrupt in a Python
// handler).
func terminalInterrupted() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false // no controlling terminal (ENXIO): the signal was sent
	}
	defer unix.Close(fd)
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// runCommand runs the command in the cgroup and waits for it.
func (sb *session) runCommand(ctx context.Context, res *Result) error {
	cmd, status, release, err := sb.command()
	if err != nil {
		return err
	}
	defer release()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = sb.spec.Stdin, sb.spec.Stdout, sb.spec.Stderr
	// The sandbox ends when the command exits, and what it left running
	// is killed with the cgroup: output that such a child still holds open
	// (a writer that is not an *os.File is copied through a pipe) is not
	// waited for beyond a moment, or the child would hold the sandbox, and
	// a stopped command's grace period, for as long as it lives.
	cmd.WaitDelay = 100 * time.Millisecond
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s in the sandbox: %w", sb.spec.Command[0], err)
	}
	grace := sb.spec.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	stop := stopOnCancel(ctx, sb.dir, sb.version == V2, cmd.Process, grace)
	defer stop()
	if status != nil {
		cmd.ExtraFiles[0].Close()
		// EOF with nothing written: the trampoline joined the cgroup and
		// exec'd the command (the pipe is close-on-exec there).
		if msg, _ := io.ReadAll(status); len(msg) > 0 {
			cmd.Wait()
			return fmt.Errorf("sandbox trampoline: %s", msg)
		}
	}
	res.Ran = true
	werr := cmd.Wait()
	res.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = unix.SignalName(ws.Signal())
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sandbox interrupted: %w", context.Cause(ctx))
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
		return werr
	}
	return nil
}

// command builds the process that runs the command in the cgroup. On v2
// the command itself is started inside with clone3 CLONE_INTO_CGROUP: the
// child is in the cgroup from its first instruction (kernel/fork.c
// cgroup_can_fork). cgroup v1 has no such way, so the v1 trampoline
// (trampoline.go) joins the cgroup and execs the command; status is the
// read end of its error pipe. release frees what command opened.
func (sb *session) command() (cmd *exec.Cmd, status *os.File, release func(), err error) {
	env := cleanEnv(os.Environ())
	if sb.version == V2 {
		fd, err := unix.Open(sb.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("open %s: %w", sb.dir, err)
		}
		cmd = &exec.Cmd{Path: sb.cmdPath, Args: sb.spec.Command, Env: env,
			SysProcAttr: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}}
		return cmd, nil, func() { unix.Close(fd) }, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd = &exec.Cmd{Path: sb.self, Args: append([]string{sb.self, sb.cmdPath}, sb.spec.Command[1:]...),
		Env: append(env, roleEnv+"="+roleExec, procsEnv+"="+filepath.Join(sb.dir, "cgroup.procs"),
			arg0Env+"="+sb.spec.Command[0]),
		ExtraFiles: []*os.File{w}}
	return cmd, r, func() { r.Close(); w.Close() }, nil
}
