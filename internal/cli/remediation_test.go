package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/kubecli"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

// runKube runs a command line in process as accel-doctor-kube, which has
// every command (accel-doctor's, accel-doctor-kubelet's and its own).
func runKube(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = cli.MainWith(context.Background(), args, &o, &e, kubecli.Extension())
	return o.String(), e.String(), code
}

// TestRemediationCommandsExist: every `accel-doctor ...` command that a
// code explain lists names (in its explanation or its fix), of every
// command's catalog, is a command with flags it has: each is run with
// --help, which parses the flags and runs nothing. It runs as
// accel-doctor-kube, where every command is its own; accel-doctor hands
// the others over to it unchanged.
func TestRemediationCommandsExist(t *testing.T) {
	out, stderr, code := runKube(t, "explain", "-o", "json")
	var codes []struct{ Code, Explain, Remediation string }
	if err := json.Unmarshal([]byte(out), &codes); err != nil || code != 0 {
		t.Fatalf("explain -o json: exit %d, %v: %s", code, err, stderr)
	}
	span := regexp.MustCompile("`accel-doctor ([^`]*)`")
	named := map[string]int{}
	for _, c := range codes {
		for _, m := range span.FindAllStringSubmatch(c.Explain+"\n"+c.Remediation, -1) {
			args := testutil.SplitArgs(m[1])
			if _, stderr, code := runKube(t, append(args, "--help")...); code != 0 || stderr != "" {
				t.Errorf("%s names `accel-doctor %s`, which does not parse, or with a deprecated flag: exit %d, %s", c.Code, m[1], code, stderr)
			}
			named[args[0]]++
		}
	}
	// The moved catalogs' commands are among them.
	for _, cmd := range []string{"check", "lint", "plugin", "claim", "dra"} {
		if named[cmd] == 0 {
			t.Errorf("no code names `accel-doctor %s`: the pattern is wrong, or the catalog lost them (%v)", cmd, named)
		}
	}
}
