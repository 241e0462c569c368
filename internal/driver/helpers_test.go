package driver

import (
	"encoding/binary"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// tree builds a host tree in a temp dir: files maps host paths to content,
// links maps host paths to symlink targets.
func tree(t *testing.T, files map[string]string, links map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	testutil.WriteTree(t, dir, files, links, "")
	return dir
}

// cacheEntry is an entry for the test cache writers.
type cacheEntry struct {
	flags      uint32
	name, path string
}

// newLDCache writes the new ("glibc-ld.so.cache1.1") format, little
// endian, as glibc's ldconfig lays it out (sysdeps/generic/dl-cache.h).
func newLDCache(ents []cacheEntry) []byte {
	hdr := make([]byte, ldCacheNewHeader)
	copy(hdr, ldCacheNewMagic+ldCacheNewVersion)
	strBase := ldCacheNewHeader + len(ents)*ldCacheNewEntry
	var strs []byte
	table := make([]byte, len(ents)*ldCacheNewEntry)
	for i, e := range ents {
		k := strBase + len(strs)
		strs = append(append(strs, e.name...), 0)
		v := strBase + len(strs)
		strs = append(append(strs, e.path...), 0)
		row := table[i*ldCacheNewEntry:]
		binary.LittleEndian.PutUint32(row[0:], e.flags)
		binary.LittleEndian.PutUint32(row[4:], uint32(k))
		binary.LittleEndian.PutUint32(row[8:], uint32(v))
	}
	binary.LittleEndian.PutUint32(hdr[20:], uint32(len(ents)))
	binary.LittleEndian.PutUint32(hdr[24:], uint32(len(strs)))
	hdr[28] = 2 // little endian
	return append(append(hdr, table...), strs...)
}

// oldLDCache writes the libc5/glibc 2.0 format; strings are relative to
// the end of the entry table.
func oldLDCache(ents []cacheEntry) []byte {
	hdr := make([]byte, ldCacheOldHeader)
	copy(hdr, ldCacheOldMagic)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(len(ents)))
	var strs []byte
	table := make([]byte, len(ents)*ldCacheOldEntry)
	for i, e := range ents {
		k := len(strs)
		strs = append(append(strs, e.name...), 0)
		v := len(strs)
		strs = append(append(strs, e.path...), 0)
		row := table[i*ldCacheOldEntry:]
		binary.LittleEndian.PutUint32(row[0:], e.flags)
		binary.LittleEndian.PutUint32(row[4:], uint32(k))
		binary.LittleEndian.PutUint32(row[8:], uint32(v))
	}
	return append(append(hdr, table...), strs...)
}
