package probe

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// LibSearch is where the dynamic loader would look for a library by its
// soname, in the loader's own order, and the first file that fits.
//
// glibc's dlopen of a bare name (elf/dl-load.c _dl_map_object) tries the
// caller's DT_RPATH, LD_LIBRARY_PATH, the caller's DT_RUNPATH,
// /etc/ld.so.cache, then the built-in system directories. The helper that
// really loads the library (cmd/accel-doctor-cuda) has no RPATH or
// RUNPATH, so the search here is the other three; the system directories
// are the union of the Debian multiarch and the lib64 layouts, a superset
// of any one glibc build's. The search tells "not installed here" apart
// without starting anything; the helper's dlopen is the real answer.
type LibSearch struct {
	Library string `json:"library"`
	// Found is the first candidate that exists and is a shared object of
	// this machine's architecture; "" when none is.
	Found string `json:"found,omitempty"`
	// Searched lists what was looked at, in order: each LD_LIBRARY_PATH
	// directory, the cache, each system directory.
	Searched []string `json:"searched"`
	// Skipped are candidates that exist but the loader would pass over
	// (another architecture, not ELF), with the reason.
	Skipped []string `json:"skipped,omitempty"`
}

// LdCachePath is the dynamic loader's cache (ldconfig(8)).
const LdCachePath = "/etc/ld.so.cache"

// systemLibDirs are the loader's built-in directories (glibc's
// SYSTEM_DIRS, sysdeps/unix/sysv/linux/.../dl-cache.h and the distribution's
// configure --libdir), for this architecture.
func systemLibDirs() []string {
	triplet := map[string]string{
		"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "riscv64": "riscv64-linux-gnu",
		"ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu", "loong64": "loongarch64-linux-gnu",
	}[runtime.GOARCH]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// FindLibrary searches for a library as the loader would (see LibSearch),
// with getenv giving LD_LIBRARY_PATH (os.Getenv for this process) and the
// cache read from LdCachePath.
func FindLibrary(name string, getenv func(string) string) LibSearch {
	s := LibSearch{Library: name, Searched: []string{}}
	try := func(p string) bool {
		if err := sharedObjectFits(p); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				s.Skipped = append(s.Skipped, fmt.Sprintf("%s: %v", p, err))
			}
			return false
		}
		s.Found = p
		return true
	}
	// elf/dl-load.c: LD_LIBRARY_PATH is split at ':' and ';'; an empty
	// element means the current directory, which is not searched here
	// (it is the probe's, not the application's).
	for _, d := range strings.FieldsFunc(getenv("LD_LIBRARY_PATH"), func(r rune) bool { return r == ':' || r == ';' }) {
		s.Searched = append(s.Searched, d+" (LD_LIBRARY_PATH)")
		if try(filepath.Join(d, name)) {
			return s
		}
	}
	b, err := os.ReadFile(LdCachePath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.Searched = append(s.Searched, LdCachePath+" (absent)")
	case err != nil:
		s.Searched = append(s.Searched, fmt.Sprintf("%s (unreadable: %v)", LdCachePath, err))
	default:
		entries, err := ParseLdCache(b)
		if err != nil {
			s.Searched = append(s.Searched, fmt.Sprintf("%s (%v)", LdCachePath, err))
			break
		}
		n := 0
		for _, e := range entries {
			if e.Name == name && e.FitsArch() {
				n++
				if try(e.Path) {
					s.Searched = append(s.Searched, fmt.Sprintf("%s (%d entries)", LdCachePath, len(entries)))
					return s
				}
			}
		}
		note := fmt.Sprintf("%s (%d entries, none for %s)", LdCachePath, len(entries), name)
		if n > 0 {
			note = fmt.Sprintf("%s (%d entries, %d for %s, all stale)", LdCachePath, len(entries), n, name)
		}
		s.Searched = append(s.Searched, note)
	}
	for _, d := range systemLibDirs() {
		s.Searched = append(s.Searched, d)
		if try(filepath.Join(d, name)) {
			return s
		}
	}
	return s
}

// SearchedString is the search for a reason: "libcuda.so.1 not found in
// /etc/ld.so.cache (...), /lib/x86_64-linux-gnu, ...".
func (s LibSearch) SearchedString() string {
	msg := fmt.Sprintf("%s not found in %s", s.Library, strings.Join(s.Searched, ", "))
	if len(s.Skipped) > 0 {
		msg += "; passed over: " + strings.Join(s.Skipped, "; ")
	}
	return msg
}

// elfMachine is this architecture's ELF machine.
var elfMachine = map[string]elf.Machine{
	"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "riscv64": elf.EM_RISCV,
	"ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "loong64": elf.EM_LOONGARCH,
}[runtime.GOARCH]

// sharedObjectFits checks what the loader checks before it maps a
// candidate (elf/dl-load.c open_verify): an ELF file of this class and
// machine. A 32-bit libcuda.so.1 under /usr/lib32 is passed over.
func sharedObjectFits(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("not a regular file")
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return fmt.Errorf("not an ELF file: %v", err)
	}
	if ef.Class != elf.ELFCLASS64 || (elfMachine != 0 && ef.Machine != elfMachine) {
		return fmt.Errorf("ELF %s %s, not for this machine", ef.Class, ef.Machine)
	}
	if ef.Type != elf.ET_DYN {
		return fmt.Errorf("ELF type %s, not a shared object", ef.Type)
	}
	return nil
}

// LdCacheEntry is one library of the loader's cache.
type LdCacheEntry struct {
	Name  string // the soname, "libcuda.so.1"
	Path  string // the file, "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
	Flags int32  // FLAG_* of glibc's sysdeps/generic/ldconfig.h
}

// The cache flags (glibc sysdeps/generic/ldconfig.h): the low byte is the
// kind (FLAG_ELF_LIBC6 for every glibc library), the high byte the ABI.
const (
	ldFlagTypeMask     = 0x00ff
	ldFlagELFLibc6     = 0x0003
	ldFlagRequiredMask = 0xff00
)

// ldArchFlag is the FLAG_* ABI byte of this architecture's 64-bit
// libraries (FLAG_X8664_LIB64, FLAG_AARCH64_LIB64, FLAG_RISCV_FLOAT_ABI_DOUBLE).
var ldArchFlag = map[string]int32{"amd64": 0x0300, "arm64": 0x0a00, "riscv64": 0x1000}[runtime.GOARCH]

// FitsArch reports whether the loader of this architecture would take the
// entry: a glibc ELF library with this machine's ABI flag (on an
// architecture without one in the table, any glibc ELF entry).
func (e LdCacheEntry) FitsArch() bool {
	if e.Flags&ldFlagTypeMask != ldFlagELFLibc6 {
		return false
	}
	return ldArchFlag == 0 || e.Flags&ldFlagRequiredMask == ldArchFlag
}

// The cache formats (glibc sysdeps/generic/dl-cache.h). The new format
// ("glibc-ld.so.cache1.1", glibc 2.32 and later write only it) has a
// 48-byte header and 24-byte entries whose key (soname) and value (path)
// are offsets from the start of the new header. Older ldconfigs wrote the
// "ld.so-1.7.0" format first (16-byte header, 12-byte entries) and the new
// one after it, aligned to 8; only the new part is read.
const (
	ldCacheMagicOld    = "ld.so-1.7.0"
	ldCacheMagicNew    = "glibc-ld.so.cache1.1"
	ldCacheHeaderOld   = 16
	ldCacheEntryOld    = 12
	ldCacheHeaderNew   = 48
	ldCacheEntryNew    = 24
	ldCacheEndianMask  = 3
	ldCacheEndianBad   = 1
	ldCacheEndianLE    = 2
	ldCacheEndianBE    = 3
	ldCacheMaxEntries  = 1 << 20
	ldCacheMaxNameSpan = 4096
)

// ParseLdCache reads /etc/ld.so.cache. It touches nothing; malformed
// input is an error, never a panic.
func ParseLdCache(b []byte) ([]LdCacheEntry, error) {
	base := 0
	if bytes.HasPrefix(b, []byte(ldCacheMagicOld)) {
		if len(b) < ldCacheHeaderOld {
			return nil, errors.New("old-format header truncated")
		}
		n := int(binary.NativeEndian.Uint32(b[12:16]))
		if n > len(b)/ldCacheEntryOld {
			return nil, fmt.Errorf("old format claims %d entries in %d bytes", n, len(b))
		}
		base = (ldCacheHeaderOld + n*ldCacheEntryOld + 7) &^ 7
		if base > len(b) || !bytes.HasPrefix(b[base:], []byte(ldCacheMagicNew)) {
			return nil, errors.New("old format only (no glibc-ld.so.cache1.1 part); this loader is too old to read")
		}
	}
	nb := b[base:]
	if !bytes.HasPrefix(nb, []byte(ldCacheMagicNew)) {
		return nil, errors.New("not a glibc-ld.so.cache1.1 file")
	}
	if len(nb) < ldCacheHeaderNew {
		return nil, errors.New("header truncated")
	}
	// The flags byte says which byte order ldconfig wrote (0: an
	// ldconfig too old to say, taken as ours); the loader ignores a cache
	// of the other order (elf/dl-cache.c _dl_load_cache_lookup).
	switch nb[28] & ldCacheEndianMask {
	case ldCacheEndianBad:
		return nil, errors.New("ldconfig marked the cache invalid")
	case ldCacheEndianLE:
		if !sameOrder(binary.LittleEndian) {
			return nil, errors.New("a little-endian cache on a big-endian machine: the loader ignores it")
		}
	case ldCacheEndianBE:
		if !sameOrder(binary.BigEndian) {
			return nil, errors.New("a big-endian cache on a little-endian machine: the loader ignores it")
		}
	}
	order := binary.NativeEndian
	n := int(order.Uint32(nb[20:24]))
	if n > ldCacheMaxEntries || n > (len(nb)-ldCacheHeaderNew)/ldCacheEntryNew {
		return nil, fmt.Errorf("claims %d entries in %d bytes", n, len(nb))
	}
	out := make([]LdCacheEntry, 0, n)
	for i := 0; i < n; i++ {
		e := nb[ldCacheHeaderNew+i*ldCacheEntryNew:]
		flags := int32(order.Uint32(e[0:4]))
		key, err := cacheString(nb, order.Uint32(e[4:8]))
		if err != nil {
			return nil, fmt.Errorf("entry %d name: %w", i, err)
		}
		val, err := cacheString(nb, order.Uint32(e[8:12]))
		if err != nil {
			return nil, fmt.Errorf("entry %d path: %w", i, err)
		}
		out = append(out, LdCacheEntry{Name: key, Path: val, Flags: flags})
	}
	return out, nil
}

// sameOrder reports whether o is this machine's byte order.
func sameOrder(o binary.ByteOrder) bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return o.Uint16(b[:]) == 1
}

// cacheString is the NUL-terminated string at off, within a bounded span.
func cacheString(b []byte, off uint32) (string, error) {
	if uint64(off) >= uint64(len(b)) {
		return "", fmt.Errorf("offset %d beyond the %d-byte cache", off, len(b))
	}
	s := b[off:]
	if len(s) > ldCacheMaxNameSpan {
		s = s[:ldCacheMaxNameSpan]
	}
	i := bytes.IndexByte(s, 0)
	if i < 0 {
		return "", fmt.Errorf("string at %d not terminated", off)
	}
	return string(s[:i]), nil
}

// ProgramInterpreter is the dynamic loader an ELF executable names
// (PT_INTERP), "" for a static one. The kernel resolves it in the root
// of the process that executes the file (fs/binfmt_elf.c
// load_elf_binary), so inside a container it is the container's.
func ProgramInterpreter(f *os.File) (string, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", err
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		if p.Filesz > 4096 {
			return "", fmt.Errorf("PT_INTERP of %d bytes", p.Filesz)
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read PT_INTERP: %w", err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}
