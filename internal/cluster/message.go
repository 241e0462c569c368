package cluster

import (
	"strconv"
	"strings"
)

// SchedulerMessage is a scheduler's "0/N nodes are available: ..." message
// (pkg/scheduler/framework/types.go, FitError.Error) taken apart:
//
//	0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s). preemption: ...
//
// The Filter reasons are "COUNT REASON" joined by ", " and sorted; a
// PreFilter's rejection is one reason without a count; the PostFilter
// part after them (preemption's verdict) is not a reason and is dropped.
type SchedulerMessage struct {
	// Nodes is N, the nodes the scheduler considered; -1 when the
	// message is not a FitError's.
	Nodes int
	// Reasons are the reasons, in the message's order. A message that is
	// not a FitError's is one reason: the message itself.
	Reasons []Reason
}

// Reason is one of the scheduler's reasons and how many nodes gave it
// (-1 when the message gives no count: a PreFilter rejection, which holds
// for every node).
type Reason struct {
	Text  string
	Nodes int
}

// maxMessage bounds what ParseSchedulerMessage looks at. Events and
// conditions are written by whoever can write them, and a FitError's
// message grows with the number of distinct reasons, not with nodes.
const maxMessage = 8 << 10

// ParseSchedulerMessage takes msg apart; it never fails: what it does not
// recognise is one reason, the message itself (cut to maxMessage bytes).
func ParseSchedulerMessage(msg string) SchedulerMessage {
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	msg = strings.TrimSpace(msg)
	whole := SchedulerMessage{Nodes: -1, Reasons: []Reason{{Text: msg, Nodes: -1}}}
	rest, ok := strings.CutPrefix(msg, "0/")
	if !ok {
		return whole
	}
	num, rest, ok := strings.Cut(rest, " nodes are available:")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 0 {
		return whole
	}
	// FitError ends the reasons with "." and appends the PostFilter
	// message after a space ("preemption: ...", or DRA's "still not
	// schedulable, preemption: ..."): the reasons end at the first ". ".
	if i := strings.Index(rest, ". "); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimSuffix(strings.TrimSpace(rest), ".")
	out := SchedulerMessage{Nodes: n}
	if rest == "" {
		return out
	}
	for _, part := range strings.Split(rest, ", ") {
		count, text, ok := strings.Cut(part, " ")
		c, err := strconv.Atoi(count)
		switch {
		case ok && err == nil && c >= 0:
			out.Reasons = append(out.Reasons, Reason{Text: strings.TrimSpace(text), Nodes: c})
		default:
			// A part without a count: a PreFilter's message (one
			// reason for all nodes), or a reason whose own text
			// holds ", ", which continues the previous reason.
			if len(out.Reasons) > 0 {
				out.Reasons[len(out.Reasons)-1].Text += ", " + part
			} else {
				out.Reasons = append(out.Reasons, Reason{Text: part, Nodes: -1})
			}
		}
	}
	return out
}
