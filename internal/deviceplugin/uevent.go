package deviceplugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Uevent is one kernel uevent: a device added, removed, bound to or
// unbound from a driver, or changed.
type Uevent struct {
	Action    string // add, remove, bind, unbind, change, move, online, offline
	DevPath   string // below /sys, e.g. /devices/pci0000:00/0000:00:02.0
	Subsystem string
	DevName   string // below /dev, for devices with a node
	Driver    string
	Env       map[string]string
}

// maxUevent bounds a message: the kernel's own buffer is
// UEVENT_BUFFER_SIZE, 2048 bytes (include/linux/kobject.h).
const maxUevent = 8192

// ParseUevent reads a message as the kernel sends it on
// NETLINK_KOBJECT_UEVENT (lib/kobject_uevent.c, kobject_uevent_env and
// alloc_uevent_skb): a header "ACTION@DEVPATH", then NUL-separated
// KEY=VALUE pairs (ACTION, DEVPATH, SUBSYSTEM, SEQNUM, and DEVNAME,
// DRIVER, MAJOR, MINOR ... where they apply). udev's rebroadcasts start
// with "libudev" and a binary header instead; they go to another group
// and are refused here.
func ParseUevent(b []byte) (Uevent, error) {
	if len(b) > maxUevent {
		return Uevent{}, fmt.Errorf("uevent of %d bytes exceeds %d", len(b), maxUevent)
	}
	if bytes.HasPrefix(b, []byte("libudev\x00")) {
		return Uevent{}, errors.New("a udev message, not the kernel's")
	}
	fields := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
	if len(fields) == 0 || len(fields[0]) == 0 {
		return Uevent{}, errors.New("empty uevent")
	}
	act, dp, ok := strings.Cut(string(fields[0]), "@")
	if !ok || act == "" || !strings.HasPrefix(dp, "/") {
		return Uevent{}, fmt.Errorf("uevent header %q is not ACTION@DEVPATH", truncate(string(fields[0]), 80))
	}
	u := Uevent{Action: act, DevPath: dp, Env: map[string]string{}}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(string(f), "=")
		if !ok || k == "" {
			continue // the kernel writes none; tolerate rather than drop the event
		}
		u.Env[k] = v
	}
	if a := u.Env["ACTION"]; a != "" && a != u.Action {
		return Uevent{}, fmt.Errorf("uevent header action %q disagrees with ACTION=%q", u.Action, a)
	}
	if p := u.Env["DEVPATH"]; p != "" && p != u.DevPath {
		return Uevent{}, fmt.Errorf("uevent header path %q disagrees with DEVPATH=%q", truncate(u.DevPath, 80), truncate(p, 80))
	}
	u.Subsystem, u.DevName, u.Driver = u.Env["SUBSYSTEM"], u.Env["DEVNAME"], u.Env["DRIVER"]
	return u, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ueventSocket listens to the kernel's uevents. It only receives: it is
// bound to multicast group 1, the kernel's (lib/kobject_uevent.c sends
// with netlink_broadcast to group 1; udev rebroadcasts to group 2), which
// any process may join (af_netlink NL_CFG_F_NONROOT_RECV for
// NETLINK_KOBJECT_UEVENT). Which network namespaces hear a device's
// uevents: kobject_uevent_net_broadcast sends the uevent of a kobject that
// belongs to no network namespace (every device but a net device) to the
// uevent socket of each namespace on uevent_sock_list, and uevent_net_init
// lists every network namespace owned by the initial user namespace and
// no other. So a pod hears them in a network namespace of its own (no
// hostNetwork needed), and does not when that namespace belongs to a user
// namespace of the pod's (hostUsers: false): measured with a loop device
// by TestUeventDeviceEventsByNetworkNamespace. Without uevents the
// fsnotify watches and the periodic rescan still catch every change,
// later.
type ueventSocket struct {
	f *os.File
}

func openUevents() (*ueventSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("uevent socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uevent socket bind: %w", err)
	}
	// A burst (a driver binding 8 GPUs) must not overflow the default
	// buffer; SO_RCVBUF is capped by net.core.rmem_max, which is enough.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	return &ueventSocket{f: os.NewFile(uintptr(fd), "uevent")}, nil
}

// run hands every kernel uevent to fn until ctx ends or the socket
// fails. An overrun (ENOBUFS: events were lost) is reported as a nil
// event, on which the caller rescans.
func (s *ueventSocket) run(ctx context.Context, fn func(*Uevent)) error {
	go func() { <-ctx.Done(); s.f.Close() }()
	rc, err := s.f.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, maxUevent)
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case rerr == unix.ENOBUFS:
			fn(nil)
			continue
		case rerr == unix.EINTR:
			continue
		case rerr != nil:
			return fmt.Errorf("uevent recv: %w", rerr)
		}
		// Only the kernel (port id 0) speaks on group 1 (sending to it
		// needs CAP_NET_ADMIN); check anyway.
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue
		}
		u, err := ParseUevent(buf[:n])
		if err != nil {
			continue
		}
		fn(&u)
	}
}
