package devnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// ProcDevicesPath lists the majors registered by drivers (fs/proc/devices.c).
const ProcDevicesPath = "/proc/devices"

// maxProcDevicesLines bounds the parse; a real file has a few dozen lines.
const maxProcDevicesLines = 1 << 14

// ProcDevices is /proc/devices: the names registered for each char and
// block major. A major may carry several names (tty and ttyS share 4) and
// a name several majors.
type ProcDevices struct {
	Char  map[uint32][]string
	Block map[uint32][]string
}

// ErrSkippedLines marks a parse that skipped lines it could not read;
// the result holds every line that parsed.
var ErrSkippedLines = errors.New("lines skipped")

// ParseProcDevices parses /proc/devices:
//
//	Character devices:
//	  1 mem
//	195 nvidia-frontend
//
//	Block devices:
//	  7 loop
//
// fs/proc/devices.c prints each entry as "%3d %s"; names may contain '/'
// ("/dev/vc/0"). A line outside a section, a bad major or a missing name
// is skipped and reported (an error wrapping ErrSkippedLines, naming the
// first one), and every good line is kept: one bad line must not hide the
// majors of the others. Lines are split without a length limit (the read
// bound of the file limits them; bufio.Scanner would give up on the whole
// file at one line over 64 KiB). The reader is read to its end: bound it.
func ParseProcDevices(r io.Reader) (ProcDevices, error) {
	pd := ProcDevices{Char: map[uint32][]string{}, Block: map[uint32][]string{}}
	b, err := io.ReadAll(r)
	if err != nil {
		return pd, fmt.Errorf("%s: %w", ProcDevicesPath, err)
	}
	var cur map[uint32][]string
	var skipped []string
	ln := 0
	for l := range bytes.Lines(b) {
		ln++
		if ln > maxProcDevicesLines {
			skipped = append(skipped, fmt.Sprintf("more than %d lines: the rest", maxProcDevicesLines))
			break
		}
		line := strings.TrimSpace(string(l))
		switch line {
		case "":
			continue
		case "Character devices:":
			cur = pd.Char
			continue
		case "Block devices:":
			cur = pd.Block
			continue
		}
		if why := addProcDevice(cur, line); why != "" {
			skipped = append(skipped, fmt.Sprintf("line %d: %s", ln, why))
		}
	}
	if len(skipped) > 0 {
		return pd, fmt.Errorf("%s: %w: %d line(s) do not parse, the first %s", ProcDevicesPath, ErrSkippedLines, len(skipped), skipped[0])
	}
	return pd, nil
}

// addProcDevice adds one "MAJOR NAME" line to a section; it returns why
// the line was not added, "" when it was.
func addProcDevice(cur map[uint32][]string, line string) string {
	if cur == nil {
		return quote(line) + " is outside a section"
	}
	maj, name, ok := strings.Cut(line, " ")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "want 'MAJOR NAME', got " + quote(line)
	}
	n, err := strconv.ParseUint(maj, 10, 32)
	// dev_t has a 12-bit major (include/linux/kdev_t.h).
	if err != nil || n >= 1<<12 {
		return "bad major " + quote(maj)
	}
	if !slices.Contains(cur[uint32(n)], name) {
		cur[uint32(n)] = append(cur[uint32(n)], name)
	}
	return ""
}

// quote quotes s for an error message, cut to 64 bytes: a hostile 64 KiB
// line must not become 64 KiB of evidence.
func quote(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:max]), len(s))
}

// ReadProcDevices reads and parses the root's /proc/devices. With an
// error wrapping ErrSkippedLines the result holds every line that parsed.
func ReadProcDevices(root *hostfs.Root) (ProcDevices, error) {
	b, err := root.ReadFile(ProcDevicesPath)
	if err != nil {
		return ProcDevices{}, err
	}
	return ParseProcDevices(strings.NewReader(string(b)))
}

// CharNames returns the names registered for a char major (nil: none, so
// open() of a node with that major gives ENXIO, fs/char_dev.c chrdev_open).
func (pd ProcDevices) CharNames(major uint32) []string { return pd.Char[major] }

// CharRegistered reports whether any driver holds the char major.
func (pd ProcDevices) CharRegistered(major uint32) bool { return len(pd.Char[major]) > 0 }

// CharMajor returns the lowest char major registered under name.
func (pd ProcDevices) CharMajor(name string) (uint32, bool) { return lookupName(pd.Char, name) }

// BlockMajor returns the lowest block major registered under name.
func (pd ProcDevices) BlockMajor(name string) (uint32, bool) { return lookupName(pd.Block, name) }

func lookupName(m map[uint32][]string, name string) (uint32, bool) {
	best, found := uint32(0), false
	for maj, names := range m {
		if slices.Contains(names, name) && (!found || maj < best) {
			best, found = maj, true
		}
	}
	return best, found
}
