package driver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
	"github.com/google/go-cmp/cmp"
)

var cacheEnts = []cacheEntry{
	{flags: LDCacheFlagELFLibc6 | LDCacheFlagX8664Lib64, name: "libnvidia-ml.so.1", path: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"},
	{flags: LDCacheFlagELFLibc6 | LDCacheFlagX8664Lib64, name: "libcuda.so.1", path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
	{flags: LDCacheFlagELFLibc6, name: "libcuda.so.1", path: "/usr/lib/i386-linux-gnu/libcuda.so.1"},
}

func wantEnts() []LDCacheEntry {
	var out []LDCacheEntry
	for _, e := range cacheEnts {
		out = append(out, LDCacheEntry{Name: e.name, Path: e.path, Flags: e.flags})
	}
	return out
}

func TestParseLDCache(t *testing.T) {
	good := newLDCache(cacheEnts)
	old := oldLDCache(cacheEnts)
	// A transitional file: old table, then the new one aligned to 8.
	trans := append([]byte{}, old...)
	for len(trans)%8 != 0 {
		trans = append(trans, 0)
	}
	trans = append(trans, good...)
	big := append([]byte{}, good...)
	big[28] = 3
	for i := 0; i < len(cacheEnts); i++ {
		row := big[ldCacheNewHeader+i*ldCacheNewEntry:]
		for _, o := range []int{0, 4, 8} {
			binary.BigEndian.PutUint32(row[o:], binary.LittleEndian.Uint32(good[ldCacheNewHeader+i*ldCacheNewEntry+o:]))
		}
	}
	binary.BigEndian.PutUint32(big[20:], uint32(len(cacheEnts)))

	mut := func(b []byte, f func([]byte)) []byte {
		c := append([]byte{}, b...)
		f(c)
		return c
	}
	tests := []struct {
		name    string
		in      []byte
		want    []LDCacheEntry
		wantErr bool
	}{
		{name: "new format", in: good, want: wantEnts()},
		{name: "old format", in: old, want: wantEnts()},
		{name: "old format with new appended", in: trans, want: wantEnts()},
		{name: "new format big endian", in: big, want: wantEnts()},
		{name: "empty new", in: newLDCache(nil), want: []LDCacheEntry{}},
		{name: "empty file", in: nil, wantErr: true},
		{name: "unknown magic", in: []byte("ELF\x7f garbage garbage garbage garbage garbage garbage"), wantErr: true},
		{name: "new header truncated", in: good[:30], wantErr: true},
		{name: "old header truncated", in: old[:13], wantErr: true},
		{name: "entries truncated", in: good[:ldCacheNewHeader+10], wantErr: true},
		{name: "nlibs huge", in: mut(good, func(b []byte) { binary.LittleEndian.PutUint32(b[20:], 0xffffffff) }), wantErr: true},
		{name: "old nlibs huge", in: mut(old, func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 0xffffffff) }), wantErr: true},
		{name: "key offset beyond end", in: mut(good, func(b []byte) { binary.LittleEndian.PutUint32(b[ldCacheNewHeader+4:], 0xfffffff0) }), wantErr: true},
		{name: "value offset beyond end", in: mut(good, func(b []byte) { binary.LittleEndian.PutUint32(b[ldCacheNewHeader+8:], uint32(len(good))) }), wantErr: true},
		{name: "unterminated string", in: good[:len(good)-1], wantErr: true},
		{name: "bad version", in: mut(good, func(b []byte) { copy(b[17:], "2.0") }), wantErr: true},
		{name: "bad endianness flag", in: mut(good, func(b []byte) { b[28] = 9 }), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLDCache(tt.in)
			testutil.CheckParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseLDCacheIs64(t *testing.T) {
	ents, err := ParseLDCache(newLDCache(cacheEnts))
	if err != nil {
		t.Fatal(err)
	}
	if !ents[1].Is64() || ents[2].Is64() {
		t.Errorf("Is64: x86-64 entry %v, i386 entry %v; want true, false", ents[1].Is64(), ents[2].Is64())
	}
	if p, ok := lookupCache(ents, "libcuda.so.1"); !ok || p != "/usr/lib/x86_64-linux-gnu/libcuda.so.1" {
		t.Errorf("lookupCache = %q, %v; want the 64-bit entry", p, ok)
	}
}

// TestParseLDCacheLive compares the parse of this machine's cache with
// what ldconfig -p prints from it.
func TestParseLDCacheLive(t *testing.T) {
	b, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Skipf("no /etc/ld.so.cache on this machine: %v", err)
	}
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		if _, serr := os.Stat("/sbin/ldconfig"); serr != nil {
			t.Skip("ldconfig not installed")
		}
		ldconfig = "/sbin/ldconfig"
	}
	out, err := exec.Command(ldconfig, "-p").Output()
	if err != nil {
		t.Skipf("ldconfig -p: %v", err)
	}
	ents, err := ParseLDCache(b)
	if err != nil {
		t.Fatalf("ParseLDCache(/etc/ld.so.cache): %v", err)
	}
	// ldconfig -p: "\tNAME (libc6,x86-64) => PATH", first line the count.
	var want []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "\t") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		_, p, ok := strings.Cut(line, " => ")
		if !ok {
			continue
		}
		want = append(want, name+" "+p)
	}
	if len(want) == 0 {
		t.Skip("ldconfig -p printed no entries")
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name+" "+e.Path)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("entries differ from ldconfig -p (-ldconfig +parsed):\n%s", d)
	}
}

func FuzzParseLDCache(f *testing.F) {
	f.Add(newLDCache(cacheEnts))
	f.Add(oldLDCache(cacheEnts))
	f.Add(newLDCache(nil))
	f.Add([]byte(ldCacheOldMagic + "\x00\x02\x00\x00\x00"))
	if b, err := os.ReadFile("/etc/ld.so.cache"); err == nil && len(b) < 1<<20 {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ents, err := ParseLDCache(b)
		if err != nil {
			return
		}
		// Each entry costs at least 12 bytes of table plus two NULs: a
		// parse can never produce more entries than the input could hold.
		if len(ents)*ldCacheOldEntry > len(b) {
			t.Fatalf("%d entries from %d bytes", len(ents), len(b))
		}
	})
}
