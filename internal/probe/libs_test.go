package probe

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// buildLdCache writes a new-format cache (dl-cache.h), optionally behind
// an old-format part as pre-2.32 ldconfig wrote it.
func buildLdCache(entries []LdCacheEntry, withOld bool) []byte {
	var strs bytes.Buffer
	type off struct{ k, v uint32 }
	offs := make([]off, len(entries))
	strBase := uint32(ldCacheHeaderNew + len(entries)*ldCacheEntryNew)
	for i, e := range entries {
		offs[i].k = strBase + uint32(strs.Len())
		strs.WriteString(e.Name + "\x00")
		offs[i].v = strBase + uint32(strs.Len())
		strs.WriteString(e.Path + "\x00")
	}
	var nb bytes.Buffer
	nb.WriteString(ldCacheMagicNew)
	le := binary.LittleEndian
	binary.Write(&nb, le, uint32(len(entries)))
	binary.Write(&nb, le, uint32(strs.Len()))
	nb.Write([]byte{ldCacheEndianLE, 0, 0, 0})
	nb.Write(make([]byte, 16)) // extension_offset, unused[3]
	for i, e := range entries {
		binary.Write(&nb, le, e.Flags)
		binary.Write(&nb, le, offs[i].k)
		binary.Write(&nb, le, offs[i].v)
		binary.Write(&nb, le, uint32(0))
		binary.Write(&nb, le, uint64(0))
	}
	nb.Write(strs.Bytes())
	if !withOld {
		return nb.Bytes()
	}
	var b bytes.Buffer
	b.WriteString(ldCacheMagicOld + "\x00")
	binary.Write(&b, le, uint32(1))
	b.Write(make([]byte, ldCacheEntryOld)) // one old entry, unused
	for b.Len()%8 != 0 {
		b.WriteByte(0)
	}
	b.Write(nb.Bytes())
	return b.Bytes()
}

func TestParseLdCache(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the builder writes little-endian caches")
	}
	want := []LdCacheEntry{
		{Name: "libcuda.so.1", Path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", Flags: 0x0303},
		{Name: "libcuda.so.1", Path: "/usr/lib32/libcuda.so.1", Flags: 0x0003},
		{Name: "libnvidia-ml.so.1", Path: "/usr/lib64/libnvidia-ml.so.1", Flags: 0x0a03},
	}
	for _, old := range []bool{false, true} {
		got, err := ParseLdCache(buildLdCache(want, old))
		if err != nil {
			t.Fatalf("old=%v: %v", old, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("old=%v (-want +got):\n%s", old, d)
		}
	}
	if runtime.GOARCH == "amd64" {
		if !want[0].FitsArch() || want[1].FitsArch() || want[2].FitsArch() {
			t.Error("FitsArch on amd64: want only the x86-64 entry")
		}
	}
	good := buildLdCache(want, false)
	bad := map[string][]byte{
		"empty":          nil,
		"not a cache":    []byte("hello, world, this is not a cache file at all......"),
		"short header":   good[:30],
		"entries cut":    good[:ldCacheHeaderNew+10],
		"old only":       append([]byte(ldCacheMagicOld+"\x00"), make([]byte, 20)...),
		"offset outside": corrupt(good, ldCacheHeaderNew+4, 0xffffff),
		"invalid flag":   corruptByte(good, 28, ldCacheEndianBad),
		"too many":       corrupt(good, 20, 1<<30),
	}
	for name, b := range bad {
		if _, err := ParseLdCache(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A string with no NUL before the end of the file.
	unterminated := append([]byte{}, good...)
	unterminated = unterminated[:len(unterminated)-1]
	if _, err := ParseLdCache(unterminated); err == nil {
		t.Error("unterminated last string: no error")
	}
}

func corrupt(b []byte, at int, v uint32) []byte {
	c := append([]byte{}, b...)
	binary.LittleEndian.PutUint32(c[at:], v)
	return c
}

func corruptByte(b []byte, at int, v byte) []byte {
	c := append([]byte{}, b...)
	c[at] = v
	return c
}

// TestParseLdCacheLive reads this machine's cache and checks it against
// ldconfig's own listing of it (ldconfig -p prints "N libs found in cache"
// and one "name (flags) => path" line per entry).
func TestParseLdCacheLive(t *testing.T) {
	b, err := os.ReadFile(LdCachePath)
	if err != nil {
		t.Skipf("no cache here: %v", err)
	}
	entries, err := ParseLdCache(b)
	if err != nil {
		t.Fatal(err)
	}
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		ldconfig = "/sbin/ldconfig"
	}
	out, err := exec.Command(ldconfig, "-p").Output()
	if err != nil {
		t.Skipf("ldconfig -p: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	m := regexp.MustCompile(`^(\d+) libs found`).FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("ldconfig -p header %q", lines[0])
	}
	if m[1] != strconv.Itoa(len(entries)) {
		t.Errorf("%d entries parsed, ldconfig -p says %s", len(entries), m[1])
	}
	line := regexp.MustCompile(`^\s+(\S+) \(.*\) => (\S+)$`)
	var want []string
	for _, l := range lines[1:] {
		if mm := line.FindStringSubmatch(l); mm != nil {
			want = append(want, mm[1]+" "+mm[2])
		}
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name+" "+e.Path)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("entries differ from ldconfig -p (-ldconfig +parsed):\n%s", d)
	}
}

func FuzzParseLdCache(f *testing.F) {
	f.Add(buildLdCache([]LdCacheEntry{{Name: "libcuda.so.1", Path: "/x/libcuda.so.1", Flags: 0x303}}, false))
	f.Add(buildLdCache([]LdCacheEntry{{Name: "a", Path: "b", Flags: 3}}, true))
	f.Add([]byte(ldCacheMagicNew))
	if b, err := os.ReadFile(LdCachePath); err == nil && len(b) < 1<<16 {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := ParseLdCache(b)
		if err == nil && len(entries) > len(b)/ldCacheEntryNew {
			t.Fatalf("%d entries from %d bytes", len(entries), len(b))
		}
	})
}

// TestFindLibrary: LD_LIBRARY_PATH first, then the loader's directories;
// a file of the right name that is not a 64-bit shared object of this
// machine is passed over with its reason; a miss names every place.
func TestFindLibrary(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	good := filepath.Join(dir, "good")
	for _, d := range []string{bad, good} {
		os.Mkdir(d, 0o755)
	}
	// Not ELF at all.
	os.WriteFile(filepath.Join(bad, "libfake.so.1"), []byte("not elf"), 0o644)
	// A real shared object of this machine: the loader itself, if found
	// through this machine's cache; any 64-bit ET_DYN of ours will do.
	so := someSharedObject(t)
	b, err := os.ReadFile(so)
	if err != nil {
		t.Skip(err)
	}
	os.WriteFile(filepath.Join(good, "libfake.so.1"), b, 0o644)

	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "LD_LIBRARY_PATH" {
				return v
			}
			return ""
		}
	}
	s := FindLibrary("libfake.so.1", env(bad+":"+good))
	if s.Found != filepath.Join(good, "libfake.so.1") {
		t.Errorf("found %q, want the good one; %+v", s.Found, s)
	}
	if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0], "not an ELF file") {
		t.Errorf("skipped %q", s.Skipped)
	}
	if len(s.Searched) != 2 {
		t.Errorf("searched %q: want the two LD_LIBRARY_PATH directories and stop", s.Searched)
	}

	miss := FindLibrary("libaccel-doctor-absent.so.1", env(""))
	if miss.Found != "" {
		t.Fatalf("found %q", miss.Found)
	}
	msg := miss.SearchedString()
	for _, want := range []string{"libaccel-doctor-absent.so.1 not found in", LdCachePath, "/usr/lib"} {
		if !strings.Contains(msg, want) {
			t.Errorf("reason %q lacks %q", msg, want)
		}
	}
}

// someSharedObject is a 64-bit shared object of this machine: libc from
// the cache, or the test skips.
func someSharedObject(t *testing.T) string {
	t.Helper()
	for _, lib := range []string{"libc.so.6", "libm.so.6"} {
		if s := FindLibrary(lib, func(string) string { return "" }); s.Found != "" {
			return s.Found
		}
	}
	t.Skip("no glibc shared object on this machine")
	return ""
}

func TestProgramInterpreter(t *testing.T) {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	defer self.Close()
	if _, err := ProgramInterpreter(self); err != nil {
		t.Fatalf("the test binary: %v", err)
	}
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		interp, err := ProgramInterpreter(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if interp == "" || !strings.Contains(interp, "ld") {
			t.Errorf("%s: interpreter %q", p, interp)
		}
		return
	}
	t.Skip("no dynamically linked /bin/sh or /usr/bin/env")
}
