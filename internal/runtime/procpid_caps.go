package runtime

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CapSet is a capability set as /proc/PID/status prints it (CapEff,
// CapBnd...): bit N is capability N.
type CapSet uint64

// capNames are the capabilities of include/uapi/linux/capability.h, by bit
// (CAP_LAST_CAP is CAP_CHECKPOINT_RESTORE, 40, since Linux 5.9). The bit
// numbers come from x/sys/unix, which carries the same header's values.
var capNames = map[int]string{
	unix.CAP_CHOWN:              "CAP_CHOWN",
	unix.CAP_DAC_OVERRIDE:       "CAP_DAC_OVERRIDE",
	unix.CAP_DAC_READ_SEARCH:    "CAP_DAC_READ_SEARCH",
	unix.CAP_FOWNER:             "CAP_FOWNER",
	unix.CAP_FSETID:             "CAP_FSETID",
	unix.CAP_KILL:               "CAP_KILL",
	unix.CAP_SETGID:             "CAP_SETGID",
	unix.CAP_SETUID:             "CAP_SETUID",
	unix.CAP_SETPCAP:            "CAP_SETPCAP",
	unix.CAP_LINUX_IMMUTABLE:    "CAP_LINUX_IMMUTABLE",
	unix.CAP_NET_BIND_SERVICE:   "CAP_NET_BIND_SERVICE",
	unix.CAP_NET_BROADCAST:      "CAP_NET_BROADCAST",
	unix.CAP_NET_ADMIN:          "CAP_NET_ADMIN",
	unix.CAP_NET_RAW:            "CAP_NET_RAW",
	unix.CAP_IPC_LOCK:           "CAP_IPC_LOCK",
	unix.CAP_IPC_OWNER:          "CAP_IPC_OWNER",
	unix.CAP_SYS_MODULE:         "CAP_SYS_MODULE",
	unix.CAP_SYS_RAWIO:          "CAP_SYS_RAWIO",
	unix.CAP_SYS_CHROOT:         "CAP_SYS_CHROOT",
	unix.CAP_SYS_PTRACE:         "CAP_SYS_PTRACE",
	unix.CAP_SYS_PACCT:          "CAP_SYS_PACCT",
	unix.CAP_SYS_ADMIN:          "CAP_SYS_ADMIN",
	unix.CAP_SYS_BOOT:           "CAP_SYS_BOOT",
	unix.CAP_SYS_NICE:           "CAP_SYS_NICE",
	unix.CAP_SYS_RESOURCE:       "CAP_SYS_RESOURCE",
	unix.CAP_SYS_TIME:           "CAP_SYS_TIME",
	unix.CAP_SYS_TTY_CONFIG:     "CAP_SYS_TTY_CONFIG",
	unix.CAP_MKNOD:              "CAP_MKNOD",
	unix.CAP_LEASE:              "CAP_LEASE",
	unix.CAP_AUDIT_WRITE:        "CAP_AUDIT_WRITE",
	unix.CAP_AUDIT_CONTROL:      "CAP_AUDIT_CONTROL",
	unix.CAP_SETFCAP:            "CAP_SETFCAP",
	unix.CAP_MAC_OVERRIDE:       "CAP_MAC_OVERRIDE",
	unix.CAP_MAC_ADMIN:          "CAP_MAC_ADMIN",
	unix.CAP_SYSLOG:             "CAP_SYSLOG",
	unix.CAP_WAKE_ALARM:         "CAP_WAKE_ALARM",
	unix.CAP_BLOCK_SUSPEND:      "CAP_BLOCK_SUSPEND",
	unix.CAP_AUDIT_READ:         "CAP_AUDIT_READ",
	unix.CAP_PERFMON:            "CAP_PERFMON",
	unix.CAP_BPF:                "CAP_BPF",
	unix.CAP_CHECKPOINT_RESTORE: "CAP_CHECKPOINT_RESTORE",
}

var capBits = func() map[string]int {
	m := make(map[string]int, len(capNames))
	for b, n := range capNames {
		m[n] = b
	}
	return m
}()

// CapabilityName is the name of capability bit b ("CAP_SYS_ADMIN"); a bit
// newer than this table is "CAP_<b>".
func CapabilityName(b int) string {
	if n, ok := capNames[b]; ok {
		return n
	}
	return "CAP_" + strconv.Itoa(b)
}

// CapabilityBit is the bit of a capability named as the OCI spec and
// capabilities(7) name them ("CAP_IPC_LOCK"; the prefix and case are
// optional, as runc accepts them).
func CapabilityBit(name string) (int, bool) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "CAP_") {
		n = "CAP_" + n
	}
	b, ok := capBits[n]
	return b, ok
}

// ParseCapSet parses a status capability field: hexadecimal, 16 digits as
// the kernel prints it (fs/proc/array.c render_cap_t).
func ParseCapSet(s string) (CapSet, error) {
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("%d hex digits", len(s))
	}
	v, err := strconv.ParseUint(s, 16, 64)
	return CapSet(v), err
}

// Has reports whether capability bit b is in the set.
func (c CapSet) Has(b int) bool { return b >= 0 && b < 64 && c&(1<<b) != 0 }

// Names lists the set's capabilities by bit.
func (c CapSet) Names() []string {
	out := make([]string, 0, bits.OnesCount64(uint64(c)))
	for b := 0; b < 64; b++ {
		if c.Has(b) {
			out = append(out, CapabilityName(b))
		}
	}
	return out
}

// String is the set as status prints it, with its names:
// "00000000a80425fb (CAP_CHOWN,CAP_DAC_OVERRIDE,...)".
func (c CapSet) String() string {
	return fmt.Sprintf("%016x (%s)", uint64(c), strings.Join(c.Names(), ","))
}

// CapSetOf is the set of the named capabilities (a spec's
// process.capabilities list) and the names it did not know.
func CapSetOf(names []string) (CapSet, []string) {
	var c CapSet
	var unknown []string
	for _, n := range names {
		if b, ok := CapabilityBit(n); ok {
			c |= 1 << b
		} else {
			unknown = append(unknown, n)
		}
	}
	return c, unknown
}
