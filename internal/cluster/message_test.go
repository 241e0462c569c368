package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSchedulerMessage(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      SchedulerMessage
	}{{
		// As the real scheduler wrote it in e2e/cluster.
		name: "insufficient",
		msg:  "0/1 nodes are available: 1 Insufficient example.com/dev. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
		want: SchedulerMessage{Nodes: 1, Reasons: []Reason{{Text: "Insufficient example.com/dev", Nodes: 1}}},
	}, {
		name: "several reasons",
		msg:  "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s). preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
		want: SchedulerMessage{Nodes: 3, Reasons: []Reason{{Text: "Insufficient nvidia.com/gpu", Nodes: 1}, {Text: "node(s) had untolerated taint(s)", Nodes: 2}}},
	}, {
		name: "claims",
		msg:  "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		want: SchedulerMessage{Nodes: 2, Reasons: []Reason{{Text: "cannot allocate all claims", Nodes: 2}}},
	}, {
		name: "prefilter, no count",
		msg:  `0/4 nodes are available: resourceclaim "gpu" not found.`,
		want: SchedulerMessage{Nodes: 4, Reasons: []Reason{{Text: `resourceclaim "gpu" not found`, Nodes: -1}}},
	}, {
		name: "a reason with a comma continues",
		msg:  "0/2 nodes are available: 2 node(s) had volume node affinity conflict, or none.",
		want: SchedulerMessage{Nodes: 2, Reasons: []Reason{{Text: "node(s) had volume node affinity conflict, or none", Nodes: 2}}},
	}, {
		name: "not a FitError",
		msg:  "pod has unbound immediate PersistentVolumeClaims",
		want: SchedulerMessage{Nodes: -1, Reasons: []Reason{{Text: "pod has unbound immediate PersistentVolumeClaims", Nodes: -1}}},
	}, {
		name: "a bad count",
		msg:  "0/x nodes are available: 1 Insufficient cpu.",
		want: SchedulerMessage{Nodes: -1, Reasons: []Reason{{Text: "0/x nodes are available: 1 Insufficient cpu.", Nodes: -1}}},
	}, {
		name: "no reasons",
		msg:  "0/0 nodes are available.",
		want: SchedulerMessage{Nodes: -1, Reasons: []Reason{{Text: "0/0 nodes are available.", Nodes: -1}}},
	}, {
		name: "zero nodes, empty",
		msg:  "0/0 nodes are available: ",
		want: SchedulerMessage{Nodes: 0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ParseSchedulerMessage(tc.msg)); d != "" {
				t.Errorf("ParseSchedulerMessage(%q) (-want +got):\n%s", tc.msg, d)
			}
		})
	}
}

func FuzzParseSchedulerMessage(f *testing.F) {
	f.Add("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s). preemption: x")
	f.Add("0/1 nodes are available: , , 1")
	f.Add("0/-1 nodes are available: 1 a")
	f.Fuzz(func(t *testing.T, msg string) {
		m := ParseSchedulerMessage(msg)
		if m.Nodes >= 0 {
			return
		}
		if len(m.Reasons) != 1 || len(m.Reasons[0].Text) > maxMessage {
			t.Fatalf("not a FitError, and not one reason of at most %d bytes: %+v", maxMessage, m)
		}
	})
}
