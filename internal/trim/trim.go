// Package trim gives a long-running process's clean pages of its own
// executable back to the kernel.
//
// A Go start runs ~1,000 package inits spread over the image, and the
// kernel's fault-around maps the file pages around each fault, so a
// daemon that runs a small part of its code for days keeps most of its
// image resident. MADV_DONTNEED on a private file mapping discards its
// page table entries; a page never written faults in again from the page
// cache (mm/madvise.c: the file is its backing store). A page that was
// written is an anonymous copy, and discarding it brings the file's bytes
// back: the .data.rel.ro of a PIE build, which the loader relocated before
// making it read-only, is such a mapping. So only mappings of the
// executable that are not writable and hold no anonymous page
// (/proc/self/smaps' Anonymous: 0 kB) are trimmed.
package trim

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Image trims the executable's clean read-only mappings now.
func Image() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return
	}
	for _, m := range clean(b, exe) {
		unix.Syscall(unix.SYS_MADVISE, uintptr(m.start), uintptr(m.end-m.start), unix.MADV_DONTNEED)
	}
}

// Later trims now, and again after a start-up's stragglers (the first
// registrations, the first scrapes) have run: at +1 s and +1 min.
func Later() {
	Image()
	time.AfterFunc(time.Second, Image)
	time.AfterFunc(time.Minute, Image)
}

type mapping struct {
	start, end uint64
}

// clean lists, from smaps, the private mappings of exe that are not
// writable and whose Anonymous is 0 kB. A mapping whose Anonymous line is
// missing is left alone.
func clean(smaps []byte, exe string) []mapping {
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if strings.HasSuffix(f[0], ":") {
			// "Anonymous:      0 kB" and the other per-mapping lines.
			if cur != nil && f[0] == "Anonymous:" && len(f) >= 2 && f[1] == "0" {
				out = append(out, *cur)
			}
			if f[0] == "Anonymous:" {
				cur = nil
			}
			continue
		}
		// A header: address perms offset dev inode pathname (proc(5)).
		cur = nil
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
		cur = &mapping{start, end}
	}
	return out
}
