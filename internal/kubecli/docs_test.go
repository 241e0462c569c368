package kubecli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/catalog"
	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/deviceplugin"
	"github.com/accel-doctor/accel-doctor/internal/dramock"
)

// The documents a user reads; their samples, counts and commands are held
// to the binaries here.
var docs = func() []string {
	ds := []string{"README.md", "deploy/README.md", "e2e/README.md", "testdata/hosts/README.md"}
	more, _ := filepath.Glob("../../docs/*.md")
	for _, m := range more {
		ds = append(ds, strings.TrimPrefix(m, "../../"))
	}
	return ds
}()

func readDoc(t *testing.T, doc string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", doc))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runTree runs a command line in-process with every command
// (accel-doctor-kube's tree).
func runTree(t *testing.T, args []string) (string, string, int) {
	t.Helper()
	var o, e bytes.Buffer
	code := cli.MainWith(context.Background(), args, &o, &e, Extension())
	return o.String(), e.String(), code
}

// sample is one sample output in a document: the command line of its
// marker, `<!-- sample: ARGS -->` on the line before the block, and the
// block's lines.
type sample struct {
	doc   string
	line  int
	args  []string
	lines []string
}

var sampleMarker = regexp.MustCompile(`^<!-- sample: (.*) -->$`)

func samplesOf(doc, text string) []sample {
	var out []sample
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		m := sampleMarker.FindStringSubmatch(lines[i])
		if m == nil || !strings.HasPrefix(lines[i+1], "```") {
			continue
		}
		s := sample{doc: doc, line: i + 1, args: strings.Fields(m[1])}
		for j := i + 2; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
			s.lines = append(s.lines, lines[j])
		}
		out = append(out, s)
	}
	return out
}

// Every sample output in the docs is what the command prints: each block
// after a sample marker is matched against the command's stdout, run here.
// "..." on a line of its own stands for any number of lines; "..." within
// a line for any text (a shortened path, a cut line). A block that starts
// with "$ accel-doctor ..." shows the command: it must be the marker's.
func TestDocSamplesAreTheOutput(t *testing.T) {
	n := 0
	for _, doc := range docs {
		for _, s := range samplesOf(doc, readDoc(t, doc)) {
			n++
			t.Run(fmt.Sprintf("%s:%d", doc, s.line), func(t *testing.T) {
				body := s.lines
				if len(body) > 0 && strings.HasPrefix(body[0], "$ ") {
					shown := strings.Join(strings.Fields(strings.ReplaceAll(strings.Join(shownCommand(&body), " "), "\\", " ")), " ")
					if want := "accel-doctor " + strings.Join(s.args, " "); shown != want {
						t.Errorf("the block shows `%s`, its marker runs `%s`", shown, want)
					}
				}
				out, stderr, _ := runTree(t, s.args)
				if out == "" {
					t.Fatalf("accel-doctor %s printed nothing: %s", strings.Join(s.args, " "), stderr)
				}
				if at, ok := matchSample(body, strings.Split(strings.TrimRight(out, "\n"), "\n")); !ok {
					t.Errorf("the sample does not match `accel-doctor %s` from its line %d (%q):\n%s",
						strings.Join(s.args, " "), at+1, body[min(at, len(body)-1)], out)
				}
			})
		}
	}
	if n < 3 {
		t.Fatalf("only %d sample markers in the docs: the README's samples are not checked", n)
	}
}

// shownCommand takes the "$ ..." line (and its continuation lines, ending
// in \) off the front of body and returns them.
func shownCommand(body *[]string) []string {
	var cmd []string
	for len(*body) > 0 {
		l := (*body)[0]
		*body = (*body)[1:]
		cmd = append(cmd, strings.TrimPrefix(l, "$ "))
		if !strings.HasSuffix(strings.TrimSpace(l), "\\") {
			break
		}
	}
	return cmd
}

// matchSample reports whether the sample lines match the output lines
// (see TestDocSamplesAreTheOutput), and if not, the sample line at which
// the longest partial match stopped.
func matchSample(sample, out []string) (int, bool) {
	best := 0
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i > best {
			best = i
		}
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		var r bool
		switch {
		case i == len(sample):
			r = j == len(out)
		case strings.TrimSpace(sample[i]) == "...":
			r = match(i+1, j) || j < len(out) && match(i, j+1)
		default:
			r = j < len(out) && lineMatches(sample[i], out[j]) && match(i+1, j+1)
		}
		memo[k] = r
		return r
	}
	if match(0, 0) {
		return 0, true
	}
	return best, false
}

// lineMatches: the sample line is the output line, where each "..." in it
// stands for any text. Trailing spaces do not count.
func lineMatches(pattern, line string) bool {
	pattern, line = strings.TrimRight(pattern, " "), strings.TrimRight(line, " ")
	parts := strings.Split(pattern, "...")
	if len(parts) == 1 {
		return pattern == line
	}
	if !strings.HasPrefix(line, parts[0]) {
		return false
	}
	rest := line[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

func TestMatchSample(t *testing.T) {
	out := []string{"Verdict: FAIL: first broken layer is 2", "  a /sys/devices/pci0000:5a/0000:5a:01.0/0000:5d:00.0/x: 8", "b", "c"}
	for _, c := range []struct {
		sample []string
		ok     bool
	}{
		{[]string{"Verdict: FAIL: first broken layer is 2", "  a /sys/devices/pci0000:5a/.../0000:5d:00.0/x: 8", "b", "c"}, true},
		{[]string{"Verdict: FAIL: ...", "..."}, true},
		{[]string{"...", "c"}, true},
		{[]string{"Verdict: FAIL: first broken layer is 3", "..."}, false},
		{[]string{"Verdict: FAIL: first broken layer is 2", "b", "c"}, false}, // a line left out without "..."
		{[]string{"...", "b"}, false},                                         // c is not in the sample
		{[]string{"...", "d"}, false},
	} {
		if _, ok := matchSample(c.sample, out); ok != c.ok {
			t.Errorf("%q: match %v, want %v", c.sample, ok, c.ok)
		}
	}
}

// numbers are the counts the docs spell out.
var numbers = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
	"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
	"eighteen": 18, "nineteen": 19, "twenty": 20}

var countClaim = regexp.MustCompile(`(?i)\b(` + func() string {
	var ws []string
	for w := range numbers {
		ws = append(ws, w)
	}
	return strings.Join(ws, "|")
}() + `|\d+) (modes|codes)\b`)

// Every count of modes or codes in the docs is the count: a mock's modes
// (the line names which mock: `--dra` for the DRA driver's) and the
// catalog's codes.
func TestDocCountsAreTrue(t *testing.T) {
	codes, _, _ := runTree(t, []string{"explain", "-o", "json"})
	nCodes := strings.Count(codes, `"code":`)
	n := 0
	for _, doc := range docs {
		for i, line := range strings.Split(readDoc(t, doc), "\n") {
			for _, m := range countClaim.FindAllStringSubmatch(line, -1) {
				n++
				said, ok := numbers[strings.ToLower(m[1])]
				if !ok {
					fmt.Sscan(m[1], &said)
				}
				var want int
				var what string
				switch {
				case strings.EqualFold(m[2], "codes"):
					want, what = nCodes, "codes in the catalog (explain)"
				case strings.Contains(line, "--dra") || strings.Contains(line, "DRA"):
					want, what = len(dramock.Modes()), "modes of plugin mock --dra"
				case strings.Contains(line, "plugin mock"):
					want, what = len(deviceplugin.Modes()), "modes of plugin mock"
				default:
					t.Errorf("%s:%d: %q counts modes of a mock the line does not name", doc, i+1, m[0])
					continue
				}
				if said != want {
					t.Errorf("%s:%d: %q, but there are %d %s", doc, i+1, m[0], want, what)
				}
			}
		}
	}
	t.Logf("%d counts checked", n)
}

var (
	codeSpan = regexp.MustCompile("`((?:sudo )?(?:\\./)?accel-doctor(?:-kube|-kubelet)? [^`]*)`")
	subshell = regexp.MustCompile(`\$\([^)]*\)`)
)

// docCommands are the accel-doctor command lines a document names: in
// code spans and on the lines of its shell blocks.
func docCommands(text string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	inShell := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			inShell = !inShell && (l == "```sh" || l == "```console" || l == "```bash")
		case inShell:
			out = append(out, l)
		}
	}
	return out
}

// commandArgs cuts a shell line down to the accel-doctor command's
// arguments: after the binary's name, before a comment, pipe, redirection
// or next command; a $(...) stands for one argument.
func commandArgs(line string) ([]string, bool) {
	line = subshell.ReplaceAllString(line, "1")
	if j := strings.Index(line, " #"); j >= 0 {
		line = line[:j]
	}
	for _, stop := range []string{" |", " >", " &&", " ;", " 2>"} {
		if j := strings.Index(line, stop); j >= 0 {
			line = line[:j]
		}
	}
	f := strings.Fields(line)
	for i, w := range f {
		// The binary's word: its name, maybe with a path (./accel-doctor,
		// /usr/bin/accel-doctor), never the source's ./cmd/accel-doctor.
		switch path.Base(w) {
		case "accel-doctor", "accel-doctor-kube", "accel-doctor-kubelet":
		default:
			continue
		}
		if strings.Contains(w, "cmd/") || i+1 == len(f) {
			return nil, false
		}
		var args []string
		for _, a := range f[i+1:] {
			args = append(args, strings.Trim(a, `'"`))
		}
		return args, true
	}
	return nil, false
}

// Every accel-doctor command line a doc names parses, with no deprecated
// flag: each is run with --help (which parses the flags, runs nothing).
func TestDocCommandsParse(t *testing.T) {
	n := 0
	for _, doc := range docs {
		for _, l := range docCommands(readDoc(t, doc)) {
			args, ok := commandArgs(l)
			if !ok {
				continue
			}
			n++
			if _, stderr, code := runTree(t, append(args, "--help")); code != 0 || stderr != "" {
				t.Errorf("%s names `%s`, which does not parse, or has a deprecated flag: exit %d: %s", doc, strings.TrimSpace(l), code, stderr)
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d command lines found in the docs: the patterns are wrong", n)
	}
	t.Logf("%d command lines parsed", n)
}

// docs/cluster.md's table of codes is cluster's catalog, with its
// statuses: a code added to the catalog and left out of the table fails.
func TestClusterDocTableIsTheCatalog(t *testing.T) {
	row := regexp.MustCompile("(?m)^\\| `(CLUSTER_[A-Z_]+)` \\| ([^|]+) \\|")
	doc := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(readDoc(t, "docs/cluster.md"), -1) {
		doc[m[1]] = strings.TrimSpace(m[2])
	}
	for _, c := range catalog.Cluster {
		st, ok := doc[c.Code]
		switch {
		case !ok:
			t.Errorf("docs/cluster.md's table lacks %s", c.Code)
		case !slices.Equal(statuses(st), statuses(c.Status)):
			t.Errorf("docs/cluster.md gives %s the status %q, the catalog %s", c.Code, st, c.Status)
		}
		delete(doc, c.Code)
	}
	for c := range doc {
		t.Errorf("docs/cluster.md's table has %s, which the catalog does not", c)
	}
}

// statuses are the status words a text names, in order of rank.
func statuses(s string) []string {
	var out []string
	for _, w := range []string{"FAIL", "WARN", "PASS", "NOT_RUN"} {
		if strings.Contains(s, w) {
			out = append(out, w)
		}
	}
	return out
}

// CI runs exactly the README's test command: the README's first screen
// gives it (the line of its code block marked "# the tests"), and it is
// .ci/run's last command, after what installs and downloads.
func TestCIRunsTheREADMETestCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, l := range strings.Split(string(readme), "\n") {
		if cmd, comment, ok := strings.Cut(l, "#"); ok && strings.HasPrefix(strings.TrimSpace(comment), "the tests") {
			want = strings.TrimSpace(cmd)
			break
		}
	}
	if want == "" {
		t.Fatal("the README gives no test command (a code line commented \"# the tests\")")
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, l := range strings.Split(string(ci), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			last = l
		}
	}
	if last != want {
		t.Errorf(".ci/run ends with %q; the README's test command is %q", last, want)
	}
}
