package report

import (
	"bytes"
	"strings"
	"testing"
)

func finding(l Layer, st Status, reason string) Finding {
	return Finding{Check: "x", Code: "X", Layer: l, Status: st, Subject: "host", Summary: "s", Reason: reason}
}

func TestVerdictNamesLayersNotRun(t *testing.T) {
	cases := []struct {
		name     string
		layers   []Layer
		findings []Finding
		status   Status
		exit     int
		summary  string
	}{
		{"pass over a layer that could not look", []Layer{1, 2, 3, 4},
			[]Finding{finding(1, Pass, ""), finding(2, Pass, ""), finding(3, Pass, ""), finding(4, NotRun, "no root")},
			Pass, 0, "PASS for layers 1-3; layer 4 NOT_RUN: no root"},
		{"nothing judged is NOT_RUN, exit 2", []Layer{1, 4},
			[]Finding{finding(1, NotRun, "no /sys"), finding(4, NotRun, "no /proc")},
			NotRun, 2, "nothing could be judged; layer 1 NOT_RUN: no /sys; layer 4 NOT_RUN: no /proc"},
		{"no findings at all", []Layer{1}, nil, NotRun, 2, "nothing was checked"},
		{"fail names the layers not run too", []Layer{1, 2, 4},
			[]Finding{finding(1, Pass, ""), finding(2, Fail, ""), finding(4, NotRun, "EPERM")},
			Fail, 1, "first broken layer is 2 (driver): 1 failure(s) there, 1 in all; layer 4 NOT_RUN: EPERM"},
		{"partial layer and empty layers", []Layer{1, 2, 3, 4},
			[]Finding{finding(1, Warn, ""), finding(4, Pass, ""), finding(4, NotRun, "r")},
			Warn, 0, "WARN for layers 1 and 4 (1 warning(s)), no FAIL; 1 check(s) of layer 4 NOT_RUN; nothing to judge in layers 2-3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{Layers: c.layers, Findings: c.findings}
			r.Decide()
			if r.Verdict.Status != c.status || r.ExitCode() != c.exit || r.Verdict.Summary != c.summary {
				t.Errorf("got %s exit %d %q\nwant %s exit %d %q", r.Verdict.Status, r.ExitCode(), r.Verdict.Summary, c.status, c.exit, c.summary)
			}
			if strings.Contains(r.Verdict.Summary, "no layer is broken") {
				t.Error("says no layer is broken")
			}
		})
	}
}

// Control characters from the host never reach a terminal or a Markdown
// page raw: an ESC sequence in a snapshot's source or a sysfs value would
// otherwise set the title, clear the screen or forge a verdict line.
func TestControlCharactersEscaped(t *testing.T) {
	evil := "x\x1b]0;pwned\x07\x1b[2J\rVerdict: PASS\u202e\xff"
	r := &Report{Command: "check", Source: evil, Layers: []Layer{1},
		Devices: []Device{{ID: "0000:01:00.0", Description: evil, Driver: evil}},
		Findings: []Finding{{Check: "c", Code: "C", Layer: 1, Status: Fail, Subject: evil, Summary: evil, Reason: evil,
			Evidence: []Evidence{{Path: evil, Value: evil + "\nsecond line"}}, Remediation: evil}}}
	r.Decide()
	for name, write := range map[string]func(*bytes.Buffer) error{
		"text":     func(b *bytes.Buffer) error { return WriteText(b, r, TextOptions{}) },
		"verbose":  func(b *bytes.Buffer) error { return WriteText(b, r, TextOptions{Verbose: true}) },
		"markdown": func(b *bytes.Buffer) error { return WriteMarkdown(b, r) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\xff"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s output holds %q raw:\n%s", name, bad, out)
			}
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07`) || !strings.Contains(out, `\u202e`) || !strings.Contains(out, `\xff`) {
			t.Errorf("%s output does not show the escaped bytes:\n%s", name, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "Verdict: PASS") {
				t.Errorf("%s: a forged verdict line starts a line", name)
			}
		}
	}
}

func TestEscapeKeepsPlainText(t *testing.T) {
	for _, s := range []string{"", "0000:18:00.0 NVIDIA GH100 [H100 SXM5 80GB]", "Ünïcode ok — NVIDIA"} {
		if safeLine(s) != s {
			t.Errorf("safeLine(%q) = %q", s, safeLine(s))
		}
	}
	if got := safeBlock("a\nb\tc"); got != "a\nb\\tc" {
		t.Errorf("safeBlock = %q", got)
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("x\x1b[2J\n\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{safeLine(s), safeBlock(s)} {
			for _, r := range out {
				if r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || isBidi(r)) {
					t.Fatalf("escape(%q) = %q holds %U", s, out, r)
				}
			}
		}
		if strings.Contains(safeLine(s), "\n") {
			t.Fatalf("safeLine(%q) holds a newline", s)
		}
	})
}

// In a container's report the verdict names the first failing checkpoint
// before the layer: a cgroup denial (layer 4, checkpoint 3) comes after a
// missing CDI mount named at checkpoint 2 even though 4 < 5.
func TestVerdictNamesFirstCheckpoint(t *testing.T) {
	r := &Report{Layers: []Layer{1, 4, 5}, Findings: []Finding{
		{Code: "A", Layer: 1, Status: Pass, Checkpoint: CheckpointHost},
		{Code: "B", Layer: 4, Status: Fail, Checkpoint: CheckpointApplied, Summary: "cgroup denies /dev/nvidia0"},
		{Code: "C", Layer: 5, Status: Fail, Checkpoint: CheckpointAsked, Summary: "CDI spec names /dev/nvidia9, which the host lacks"},
	}}
	r.Decide()
	v := r.Verdict
	if v.Checkpoint != CheckpointAsked || v.Layer != 5 ||
		v.Summary != "first broken checkpoint is 2 (what should inject it), layer 5 (runtime / CDI): CDI spec names /dev/nvidia9, which the host lacks; 2 failure(s) in all" {
		t.Errorf("verdict %+v", v)
	}
}
