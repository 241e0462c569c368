package testutil

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// UnpackTTAR extracts a ttar archive (the text archive format of
// prometheus/procfs' fixtures: "Directory: P", "Path: P" with "Lines: N"
// and N lines of content, or "SymlinkTo: T", then "Mode: M"; NUL bytes
// are spelled NULLBYTE and a last line without a newline ends in EOF)
// into a temp dir and returns the directory. Paths that climb out are
// skipped. It fails the test on a malformed archive.
func UnpackTTAR(t testing.TB, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dst := t.TempDir()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	inside := func(p string) (string, bool) {
		c := filepath.Clean(p)
		if filepath.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
			return "", false
		}
		return filepath.Join(dst, c), true
	}
	fail := func(format string, args ...any) {
		t.Fatalf("%s:%d: %s", filepath.Base(archive), line, fmt.Sprintf(format, args...))
	}
	for {
		l, ok := next()
		if !ok {
			break
		}
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "Directory: "):
			if p, ok := inside(strings.TrimPrefix(l, "Directory: ")); ok {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		case strings.HasPrefix(l, "Path: "):
			p, keep := inside(strings.TrimPrefix(l, "Path: "))
			l, ok = next()
			if !ok {
				fail("Path without content")
			}
			var data []byte
			switch {
			case strings.HasPrefix(l, "SymlinkTo: "):
				if keep {
					os.MkdirAll(filepath.Dir(p), 0o755)
					if err := os.Symlink(strings.TrimPrefix(l, "SymlinkTo: "), p); err != nil {
						t.Fatal(err)
					}
				}
				continue
			case strings.HasPrefix(l, "Lines: "):
				var err error
				if data, err = ttarLines(l, next); err != nil {
					fail("%v", err)
				}
			default:
				fail("want Lines or SymlinkTo, got %q", l)
			}
			if keep {
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		case strings.HasPrefix(l, "Mode: "):
		default:
			fail("unexpected %q", l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// ttarLines reads the content that the line "Lines: N" announces, from
// next: N lines, the last without its newline when it ends in EOF, NUL
// bytes spelled NULLBYTE.
func ttarLines(header string, next func() (string, bool)) ([]byte, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(header, "Lines: "))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("bad %q", header)
	}
	var sb strings.Builder
	for i := 0; i < n; i++ {
		c, ok := next()
		if !ok {
			return nil, fmt.Errorf("%d of %d lines", i, n)
		}
		if i == n-1 && strings.HasSuffix(c, "EOF") {
			sb.WriteString(strings.TrimSuffix(c, "EOF"))
		} else {
			sb.WriteString(c + "\n")
		}
	}
	return []byte(strings.ReplaceAll(sb.String(), "NULLBYTE", "\x00")), nil
}
