package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/accel-doctor/accel-doctor/internal/cli"
	"github.com/accel-doctor/accel-doctor/internal/kubecli"
	"github.com/accel-doctor/accel-doctor/internal/kubeletcli"
)

// The three binaries' command trees, as their main functions build them.
var binaries = []struct {
	name string
	ext  func() *cli.Extension
}{
	{"accel-doctor", func() *cli.Extension { return nil }},
	{cli.KubeletBinary, kubeletcli.Extension},
	{cli.KubeBinary, kubecli.Extension},
}

// Every binary's explain is the same catalog, in every format, and the
// same error for a code none has.
func TestExplainSameInEveryBinary(t *testing.T) {
	for _, args := range [][]string{{"explain"}, {"explain", "-o", "json"}, {"explain", "-o", "markdown"}, {"explain", "lint_clean", "PLUGIN_CRASHED", "CGROUP_DEVICE_DENIED"}, {"explain", "LINT_PRIVILEGD_GPU"}} {
		var first struct{ out, err string }
		for i, b := range binaries {
			var o, e bytes.Buffer
			code := cli.MainWith(context.Background(), args, &o, &e, b.ext())
			want := 0
			if args[len(args)-1] == "LINT_PRIVILEGD_GPU" {
				want = 2
			}
			if code != want {
				t.Errorf("%s %q: exit %d, want %d: %s", b.name, args, code, want, e.String())
			}
			if i == 0 {
				first.out, first.err = o.String(), e.String()
				continue
			}
			if o.String() != first.out || e.String() != first.err {
				t.Errorf("%s %q differs from accel-doctor's (%d bytes and %q; accel-doctor %d bytes and %q)", b.name, args, o.Len(), e.String(), len(first.out), first.err)
			}
		}
		if args[len(args)-1] == "json" {
			var codes []struct{ Code string }
			if err := json.Unmarshal([]byte(first.out), &codes); err != nil || len(codes) < 300 {
				t.Errorf("explain -o json: %d codes, %v", len(codes), err)
			}
		}
	}
}
