package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// The sandbox re-executes its own binary (os.Executable) for three small
// jobs, selected by the environment variable ACCEL_DOCTOR_SANDBOX_ROLE:
//
//	exec    cgroup v1 only: write its own pid (0) to the cgroup.procs
//	        named by ACCEL_DOCTOR_SANDBOX_PROCS, then exec argv[1:] (argv[1]
//	        is the resolved path, ACCEL_DOCTOR_SANDBOX_ARG0 the name to show
//	        as argv[0]). cgroup v1 has no way to start a process inside a
//	        cgroup (CLONE_INTO_CGROUP is cgroup2 only), and exec.Cmd has no
//	        hook between fork and exec. Errors go to fd 3, which is closed
//	        on a successful exec, so the parent can tell "the command ran
//	        and failed" from "the command never ran".
//	probe   cgroup2 only, started before the cgroup exists and moved into
//	        it by accel-doctor before it sends the request: read a JSON
//	        request on stdin (EOF: exit at once), run the probes, and
//	        write the results and its /proc/thread-self/cgroup as JSON on
//	        stdout. (On v1 the probes run on a thread of accel-doctor
//	        itself; see runProbes.)
//	reaper  started before the cgroup is made, in its own session so that
//	        ^C to accel-doctor's process group does not reach it, holding
//	        the read end of a pipe (fd 3) whose write end only accel-doctor
//	        holds. When the pipe closes without "done" (accel-doctor died
//	        or could not finish its cleanup), it kills every process in
//	        ACCEL_DOCTOR_SANDBOX_DIR (a cgroup2 one when
//	        ACCEL_DOCTOR_SANDBOX_V2=true) and removes it.
//
// The variables are removed from the environment of the command the
// sandbox runs, so an accel-doctor inside the sandbox behaves normally.
const (
	roleEnv    = "ACCEL_DOCTOR_SANDBOX_ROLE"
	procsEnv   = "ACCEL_DOCTOR_SANDBOX_PROCS"
	arg0Env    = "ACCEL_DOCTOR_SANDBOX_ARG0"
	dirEnv     = "ACCEL_DOCTOR_SANDBOX_DIR"
	v2Env      = "ACCEL_DOCTOR_SANDBOX_V2"
	roleExec   = "exec"
	roleProbe  = "probe"
	roleReaper = "reaper"
	reaperDone = "done"
	// trampolineFailed is the exit status of a trampoline that could
	// not do its job.
	trampolineFailed = 125
)

// TrampolineMain runs the sandbox's helper roles. cmd/accel-doctor's
// main must call it first thing, before flag parsing or any other work:
//
//	func main() {
//		if cgroup.TrampolineMain() {
//			return
//		}
//		...
//	}
//
// It returns false at once when ACCEL_DOCTOR_SANDBOX_ROLE is not set. When
// it is, the process is a sandbox helper: TrampolineMain does the
// job and exits the process (or replaces it with the command); it never
// returns true in practice, the result only documents the contract.
// Test binaries that call Run must call it from TestMain.
func TrampolineMain() (handled bool) {
	role, ok := os.LookupEnv(roleEnv)
	if !ok {
		return false
	}
	switch role {
	case roleExec:
		os.Exit(trampolineExec())
	case roleProbe:
		os.Exit(trampolineProbe())
	case roleReaper:
		os.Exit(trampolineReaper())
	}
	fmt.Fprintf(os.Stderr, "accel-doctor: unknown %s %q\n", roleEnv, role)
	os.Exit(trampolineFailed)
	return true
}

// cleanEnv drops the trampoline's variables.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, e := range env {
		if !strings.HasPrefix(e, "ACCEL_DOCTOR_SANDBOX_") {
			out = append(out, e)
		}
	}
	return out
}

// join moves this process into the v1 cgroup whose cgroup.procs
// is given; writing 0 moves the writer (kernel/cgroup/cgroup.c
// cgroup_procs_write_start).
func join(procs string) error {
	if err := os.WriteFile(procs, []byte("0"), 0); err != nil {
		return fmt.Errorf("join %s: %w", procs, err)
	}
	return nil
}

func trampolineExec() int {
	status := os.NewFile(3, "sandbox-status")
	fail := func(err error) int {
		if status != nil {
			fmt.Fprint(status, err.Error())
		}
		return trampolineFailed
	}
	if status == nil {
		return trampolineFailed
	}
	unix.CloseOnExec(3)
	if len(os.Args) < 2 {
		return fail(fmt.Errorf("no command"))
	}
	if err := join(os.Getenv(procsEnv)); err != nil {
		return fail(err)
	}
	argv := append([]string{os.Getenv(arg0Env)}, os.Args[2:]...)
	if argv[0] == "" {
		argv[0] = os.Args[1]
	}
	err := unix.Exec(os.Args[1], argv, cleanEnv(os.Environ()))
	return fail(fmt.Errorf("exec %s: %w", os.Args[1], err))
}

func trampolineProbe() int {
	runtime.LockOSThread()
	var req probeRequest
	var rep probeReply
	if err := json.NewDecoder(io.LimitReader(os.Stdin, 16<<20)).Decode(&req); err != nil {
		rep.Error = "read request: " + err.Error()
	} else {
		rep = probeHere(req.Probes, "")
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil || rep.Error != "" {
		return trampolineFailed
	}
	return 0
}

func trampolineReaper() int {
	// Only SIGKILL may stop the reaper: a hangup or a stray ^C must not
	// cost the cleanup.
	signal.Ignore(unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGPIPE)
	dir := os.Getenv(dirEnv)
	pipe := os.NewFile(3, "sandbox-reaper")
	if pipe == nil || dir == "" {
		return trampolineFailed
	}
	msg, _ := io.ReadAll(io.LimitReader(pipe, 64))
	if string(msg) == reaperDone {
		return 0
	}
	if err := destroy(dir, os.Getenv(v2Env) == "true"); err != nil {
		fmt.Fprintf(os.Stderr, "accel-doctor sandbox reaper: %v\n", err)
		return 1
	}
	return 0
}
