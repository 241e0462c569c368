package cli

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// trimImage drops this process's clean pages of its own executable: the
// read-only and executable private file mappings of the binary
// (/proc/self/maps). A Go start runs ~1,000 package inits spread over the
// image, and the kernel's fault-around maps the file pages around each
// fault, so a daemon that runs a small part of its code for days keeps
// most of a 19 MiB image resident. MADV_DONTNEED on a private mapping
// that was never written discards the page table entries only: a later
// access faults the page in again from the page cache (mm/madvise.c;
// the file is the page's backing store). Writable mappings (.data, .bss,
// the heap) are never touched. For long-running commands (plugin serve,
// the agent), called once they serve, and again after a minute.
func trimImage() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// address perms offset dev inode pathname (proc(5))
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe || len(f[1]) != 4 || f[1][1] != '-' || f[1][3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED)
	}
}

// trimImageLater trims now and again after the start-up's stragglers
// (the first registrations, ListAndWatch, the first scrapes) have run.
func trimImageLater() {
	trimImage()
	time.AfterFunc(time.Second, trimImage)
	time.AfterFunc(time.Minute, trimImage)
}
