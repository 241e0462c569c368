package enter

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Credentials are the container process's identity, in the ids of the
// namespace the probe runs in (the container's own, or its replica).
type Credentials struct {
	UID, GID   uint32
	Groups     []uint32
	Inh        uint64
	Prm        uint64
	Eff        uint64
	Bnd        uint64
	Amb        uint64
	NoNewPrivs bool
}

// applyCredentials gives the calling OS thread the credentials, in the
// order runc gives them to a container's process (libcontainer
// init_linux.go finalizeNamespace): bounding set first (dropping needs
// CAP_SETPCAP, which the later steps may take away), keep capabilities
// across the uid change, groups, gid, uid, then the capability sets and
// the ambient set, and no_new_privs last.
//
// Every call is a raw system call, which acts on the calling thread only
// (credentials are per task, kernel/cred.c): Go's syscall.Setuid and
// friends would apply them to every thread of the process
// (AllThreadsSyscall). The caller must have locked its goroutine to the
// thread and must do all its work there.
func applyCredentials(c Credentials) error {
	for capNum := 0; capNum < 64; capNum++ {
		if c.Bnd&(1<<capNum) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(capNum), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // beyond the last capability this kernel knows
			}
			return fmt.Errorf("drop capability %d from the bounding set: %w", capNum, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("keep capabilities: %w", err)
	}
	groups := make([]uint32, len(c.Groups))
	copy(groups, c.Groups)
	var gp unsafe.Pointer
	if len(groups) > 0 {
		gp = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); e != 0 {
		return fmt.Errorf("setgroups %v: %w", c.Groups, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(c.GID), uintptr(c.GID), uintptr(c.GID)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", c.GID, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(c.UID), uintptr(c.UID), uintptr(c.UID)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", c.UID, e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(c.Eff), Permitted: uint32(c.Prm), Inheritable: uint32(c.Inh)},
		{Effective: uint32(c.Eff >> 32), Permitted: uint32(c.Prm >> 32), Inheritable: uint32(c.Inh >> 32)},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset eff %016x prm %016x inh %016x: %w", c.Eff, c.Prm, c.Inh, err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient set: %w", err)
	}
	for capNum := 0; capNum < 64; capNum++ {
		if c.Amb&(1<<capNum) == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(capNum), 0, 0); err != nil {
			return fmt.Errorf("raise ambient capability %d: %w", capNum, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_KEEPCAPS, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("clear keep-capabilities: %w", err)
	}
	if c.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	return nil
}
