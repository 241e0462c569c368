package devnode

import (
	"bufio"
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
// ("/dev/vc/0"). A line outside a section, a bad major or a missing name is
// an error.
func ParseProcDevices(r io.Reader) (ProcDevices, error) {
	pd := ProcDevices{Char: map[uint32][]string{}, Block: map[uint32][]string{}}
	var cur map[uint32][]string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), 64*1024)
	ln := 0
	for sc.Scan() {
		ln++
		if ln > maxProcDevicesLines {
			return pd, fmt.Errorf("/proc/devices: more than %d lines", maxProcDevicesLines)
		}
		line := strings.TrimSpace(sc.Text())
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
		if cur == nil {
			return pd, fmt.Errorf("/proc/devices line %d: %q is outside a section", ln, line)
		}
		maj, name, ok := strings.Cut(line, " ")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return pd, fmt.Errorf("/proc/devices line %d: want 'MAJOR NAME', got %q", ln, line)
		}
		n, err := strconv.ParseUint(maj, 10, 32)
		// dev_t has a 12-bit major (include/linux/kdev_t.h).
		if err != nil || n >= 1<<12 {
			return pd, fmt.Errorf("/proc/devices line %d: bad major %q", ln, maj)
		}
		if !slices.Contains(cur[uint32(n)], name) {
			cur[uint32(n)] = append(cur[uint32(n)], name)
		}
	}
	if err := sc.Err(); err != nil {
		return pd, fmt.Errorf("/proc/devices: %w", err)
	}
	return pd, nil
}

// ReadProcDevices reads and parses the root's /proc/devices.
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
