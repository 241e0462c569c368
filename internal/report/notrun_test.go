package report

import (
	"strings"
	"testing"
)

// Every blocker has a fix of its own, named, and a NOT_RUN made with
// CouldNotLook carries the reason and that fix.
func TestEveryBlockerHasItsFix(t *testing.T) {
	fixes := map[string]Blocker{}
	names := map[string]bool{}
	for _, b := range Blockers() {
		w := Why{Blocker: b, Reason: "r", Need: "NEED", Where: "/opt/ad", Earlier: &Finding{Code: "EARLIER_CODE", Subject: "s", Layer: LayerDriver, Remediation: "Do the earlier thing."}}
		if b == Explained {
			w.More = "Explained fix."
		}
		fix := w.Fix()
		if strings.TrimSpace(fix) == "" {
			t.Errorf("%v: no fix", b)
		}
		if o, dup := fixes[fix]; dup {
			t.Errorf("%v and %v have the same fix %q", b, o, fix)
		}
		fixes[fix] = b
		if n := b.String(); names[n] || strings.HasPrefix(n, "blocker ") {
			t.Errorf("%v: name %q", b, n)
		} else {
			names[n] = true
		}
		var f Finding
		f.CouldNotLook(w)
		if f.Status != NotRun || f.Reason != "r" || f.Remediation != fix {
			t.Errorf("%v: %+v", b, f)
		}
	}
	// The parameters reach the words.
	for _, c := range []struct {
		w    Why
		want []string
	}{
		{Helper("r", "accel-doctor-kubelet", "/usr/local/bin"), []string{"accel-doctor-kubelet", "/usr/local/bin", "PATH"}},
		{Privilege("r", "CAP_SYS_ADMIN"), []string{"CAP_SYS_ADMIN", `["SYS_ADMIN"]`}},
		{Privilege("r", "").FromCapture(true), []string{"snapshot", "as root"}},
		{Input("r", "--guest-memory SIZE"), []string{"Give --guest-memory SIZE."}},
		{AfterFix("r", Finding{Code: "DEVNODE_MISSING", Subject: "/dev/nvidia0", Layer: LayerDevNode, Remediation: "Make the node."}), []string{"Fix DEVNODE_MISSING", "/dev/nvidia0", "Make the node."}},
		{HostPath("r", "/var/lib/kubelet"), []string{"/var/lib/kubelet", "--root"}},
		{Capture("r", "/dev"), []string{"/dev", "accel-doctor snapshot"}},
		{API(APIForbidden, "r", "list nodes"), []string{"`kubectl auth can-i list nodes`"}},
		{Explain("r", "Do this.").With("And that."), []string{"Do this. And that."}},
	} {
		for _, s := range c.want {
			if !strings.Contains(c.w.Fix(), s) {
				t.Errorf("%v: fix %q does not say %q", c.w.Blocker, c.w.Fix(), s)
			}
		}
	}
}
