package sandbox

// The sandbox against runc on the real kernel: for every (rule set,
// device, access) of testutil.DeviceRuleCases, `sandbox --v1`,
// `sandbox --v2`, runc's own v1 writer and runc's own v2 program
// (github.com/opencontainers/cgroups/devices: DevicesSetV1, DevicesSetV2)
// must give a real process the EPERM-or-not the table says: the same
// everywhere, except the table's 'P' entries, where the v1 controller and
// a v2 program genuinely differ (see internal/cgroup/rules.go).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	_ "github.com/opencontainers/cgroups/devices" // registers cgroups.DevicesSetV1/V2: runc's own writers
	"github.com/opencontainers/cgroups/devices/config"
	"golang.org/x/sys/unix"

	"github.com/accel-doctor/accel-doctor/internal/probe"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

var tableAccesses = []probe.Access{probe.Read, probe.Write, probe.ReadWrite, probe.Mknod}

// mechanism is one way to apply a rule set and probe inside it; it
// returns the errno of each item.
type mechanism struct {
	name string
	v1   bool // enforced by the v1 controller (else a v2 program)
	run  func(t *testing.T, def Default, rules []config.Rule, items []probeItem) []unix.Errno
}

func TestSandboxMatchesRunc(t *testing.T) {
	m := testMounts(t, Auto)
	paths := tableNodes(t)
	items := probeItems(paths, tableAccesses)
	for i, it := range items {
		if b := doProbe(it); b.Errno == unix.EPERM || b.Errno == unix.EACCES {
			t.Skipf("%s %s fails outside any test cgroup (%s): host policy would hide the comparison", it.Path, it.Access, b.ErrnoName)
		} else if b.Errno != 0 {
			t.Fatalf("item %d: %s %s outside: %+v", i, it.Path, it.Access, b)
		}
	}
	var mechs []mechanism
	if m.DevicesV1 != "" {
		mechs = append(mechs, sandboxMechanism(V1), runcV1Mechanism(m.DevicesV1))
	} else {
		t.Log("no v1 devices controller here: v1 not compared")
	}
	if m.Unified != "" {
		mechs = append(mechs, sandboxMechanism(V2), runcV2Mechanism(m.Unified))
	} else {
		t.Log("no cgroup2 here: v2 not compared")
	}
	tuples, differ := 0, 0
	for _, c := range testutil.DeviceRuleCases {
		t.Run(c.Name, func(t *testing.T) {
			rules := tableRules(t, c)
			want := tableWant(t, c, items)
			for _, mech := range mechs {
				got := mech.run(t, Default(c.Default), rules, items)
				for i, it := range items {
					if wantEPERM := want[i] == 'N' || (want[i] == 'P' && mech.v1); (got[i] == unix.EPERM) != wantEPERM {
						t.Errorf("%s: %s %s: errno %v, want EPERM=%v (%c)", mech.name, it.Path, it.Access, got[i], wantEPERM, want[i])
					}
				}
			}
			for _, w := range want {
				tuples++
				if w == 'P' {
					differ++
				}
			}
		})
	}
	t.Logf("%d (rule set, node, access) tuples on %d mechanisms; %d where v1 and v2 differ", tuples, len(mechs), differ)
	if tuples < 50 {
		t.Errorf("only %d tuples", tuples)
	}
}

// TestSandboxRefusesWhatRuncRefuses: a rule inside a wider one with the
// default's verdict is refused by runc (v1 and v2) and by the sandbox.
func TestSandboxRefusesWhatRuncRefuses(t *testing.T) {
	m := testMounts(t, Auto)
	rules := []config.Rule{sbRule(t, "c 1:* rw", true), sbRule(t, "c 1:5 w", false)}
	if _, err := Run(context.Background(), Spec{Default: DefaultDeny, Rules: rules, Command: []string{"true"}}); err == nil {
		t.Error("the sandbox accepted a hole in a wider rule")
	}
	for _, h := range []struct {
		mount string
		set   func(string, *cgroups.Resources) error
	}{{m.DevicesV1, cgroups.DevicesSetV1}, {m.Unified, cgroups.DevicesSetV2}} {
		if h.mount == "" {
			continue
		}
		dir := testCgroup(t, h.mount)
		if err := h.set(dir, &cgroups.Resources{Devices: runcRules(DefaultDeny, rules)}); err == nil {
			t.Errorf("runc accepted the rules in %s; the sandbox's refusal is not runc's", dir)
		}
	}
}

// tableNodes checks that testutil's nodes are the devices they claim.
func tableNodes(t *testing.T) []string {
	var paths []string
	for _, n := range testutil.DeviceRuleNodes {
		typ, maj, min := nodeNumbers(n.Path)
		if typ != 'c' || maj != n.Major || min != n.Minor {
			t.Skipf("%s is not c %d:%d here", n.Path, n.Major, n.Minor)
		}
		paths = append(paths, n.Path)
	}
	return paths
}

// tableWant is the case's letter for each item, in probeItems order.
func tableWant(t *testing.T, c testutil.DeviceRuleCase, items []probeItem) []byte {
	var want []byte
	for _, n := range testutil.DeviceRuleNodes {
		w := c.Want[fmt.Sprintf("%d:%d", n.Major, n.Minor)]
		if len(w) != len(tableAccesses) {
			t.Fatalf("%s: want %q for %s", c.Name, w, n.Path)
		}
		want = append(want, w...)
	}
	if len(want) != len(items) {
		t.Fatalf("%d expectations for %d items", len(want), len(items))
	}
	return want
}

func sandboxMechanism(v Version) mechanism {
	return mechanism{name: "sandbox --" + string(v), v1: v == V1,
		run: func(t *testing.T, def Default, rules []config.Rule, items []probeItem) []unix.Errno {
			var nodes []string
			for _, it := range items {
				if len(nodes) == 0 || nodes[len(nodes)-1] != it.Path {
					nodes = append(nodes, it.Path)
				}
			}
			res, err := Run(context.Background(), Spec{Version: v, Default: def, Rules: rules, Nodes: nodes, Accesses: tableAccesses})
			if err != nil {
				t.Fatalf("sandbox --%s: %v", v, err)
			}
			if len(res.Probes) != len(items) {
				t.Fatalf("sandbox --%s: %d probes for %d items", v, len(res.Probes), len(items))
			}
			var out []unix.Errno
			for i, p := range res.Probes {
				if p.Node != items[i].Path || p.Access != items[i].Access {
					t.Fatalf("probe %d is %s %s, want %s %s", i, p.Node, p.Access, items[i].Path, items[i].Access)
				}
				out = append(out, p.InCgroup.Errno)
			}
			return out
		}}
}

// runcRules is what runc is given: the default as an "a" rule, then the
// rules (runc's emulator starts from deny-all).
func runcRules(def Default, rules []config.Rule) []*config.Rule {
	out := []*config.Rule{{Type: config.WildcardDevice, Major: config.Wildcard, Minor: config.Wildcard,
		Permissions: "rwm", Allow: def == DefaultAllow}}
	for i := range rules {
		r := rules[i]
		out = append(out, &r)
	}
	return out
}

func runcV1Mechanism(mount string) mechanism {
	return mechanism{name: "runc's DevicesSetV1", v1: true,
		run: func(t *testing.T, def Default, rules []config.Rule, items []probeItem) []unix.Errno {
			dir := testCgroup(t, mount)
			if err := cgroups.DevicesSetV1(dir, &cgroups.Resources{Devices: runcRules(def, rules)}); err != nil {
				t.Fatalf("runc's DevicesSetV1: %v", err)
			}
			// A thread of this test joins the cgroup, as the sandbox's own
			// v1 probes do, and dies with its goroutine.
			out := make(chan probeReply, 1)
			go probeOnThread(out, items, filepath.Join(dir, "tasks"))
			return replyErrnos(t, <-out, dir, len(items))
		}}
}

func runcV2Mechanism(mount string) mechanism {
	return mechanism{name: "runc's DevicesSetV2", v1: false,
		run: func(t *testing.T, def Default, rules []config.Rule, items []probeItem) []unix.Errno {
			dir := testCgroup(t, mount)
			if err := cgroups.DevicesSetV2(dir, &cgroups.Resources{Devices: runcRules(def, rules)}); err != nil {
				t.Fatalf("runc's DevicesSetV2: %v", err)
			}
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			pr, err := startProber(self)
			if err != nil {
				t.Fatal(err)
			}
			defer pr.abort()
			return replyErrnos(t, pr.probe(context.Background(), dir, items), dir, len(items))
		}}
}

func replyErrnos(t *testing.T, rep probeReply, dir string, n int) []unix.Errno {
	t.Helper()
	if rep.Error != "" {
		t.Fatalf("probe in %s: %s", dir, rep.Error)
	}
	if !strings.Contains(rep.ProcCgroup, "/"+filepath.Base(dir)+"\n") {
		t.Fatalf("probe was not in %s: %q", dir, rep.ProcCgroup)
	}
	if len(rep.Results) != n {
		t.Fatalf("%d results for %d probes", len(rep.Results), n)
	}
	var out []unix.Errno
	for _, r := range rep.Results {
		out = append(out, r.Errno)
	}
	return out
}

// testCgroup: see testutil.TestCgroup.
func testCgroup(t *testing.T, mount string) string { return testutil.TestCgroup(t, mount) }
