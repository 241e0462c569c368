package report

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Everything a report prints may come from the host or a snapshot: sysfs
// values, file contents, a snapshot's own description. A terminal acts on
// control characters (ESC sequences set the title, clear the screen, move
// the cursor and so can forge a verdict line), so text and Markdown output
// show them escaped, as Go would quote them. JSON needs nothing: the
// encoder escapes control characters itself.

// safeLine escapes every control character, newlines included: for text
// that must stay on one line (a summary, the source in the header).
func safeLine(s string) string { return escapeControls(s, false) }

// safeBlock escapes control characters but keeps newlines, for values that
// are multi-line on purpose (a stack trace in evidence).
func safeBlock(s string) string { return escapeControls(s, true) }

func escapeControls(s string, keepNewline bool) string {
	if isPlain(s, keepNewline) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && keepNewline:
			b.WriteByte('\n')
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || isBidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isPlain is the fast path: printable ASCII (and newlines when kept) needs
// no copy.
func isPlain(s string, keepNewline bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c == 0x7f || (c < 0x20 && !(keepNewline && c == '\n')) {
			return false
		}
	}
	return true
}

// isBidi reports the Unicode bidirectional formatting characters, which can
// make a line read differently from what it holds (CVE-2021-42574).
func isBidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}
