package cdi

import (
	"fmt"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/accel-doctor/accel-doctor/internal/runtime"
)

// NvidiaVisibleDevicesEnv is the variable the legacy NVIDIA stack
// (nvidia-container-runtime and its hook) reads to pick GPUs. CUDA base
// images set it to "all" in their own environment, so its presence says
// little about what a pod asked for: it is judged by presence, and its
// value only when it is a device list.
const NvidiaVisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// VisibleKind is what an NVIDIA_VISIBLE_DEVICES value asks for.
type VisibleKind string

const (
	VisibleAll       VisibleKind = "all"     // every GPU
	VisibleNone      VisibleKind = "none"    // no GPU, but the driver's libraries and tools
	VisibleVoid      VisibleKind = "void"    // as if unset ("void" or empty)
	VisibleList      VisibleKind = "list"    // the listed devices
	VisibleUnknown   VisibleKind = "unknown" // a value we may not read (redacted in a snapshot)
	VisibleMalformed VisibleKind = "malformed"
)

// VisibleDevice is one entry of a device list.
type VisibleDevice struct {
	Value string `json:"value"`
	// Form is "index" (0), "mig-index" (0:1), "uuid" (GPU-..., MIG-...)
	// or "cdi" (a qualified CDI name, which the toolkit's CDI mode passes
	// through as it is).
	Form string `json:"form"`
}

// NvidiaVisible is a parsed NVIDIA_VISIBLE_DEVICES value.
type NvidiaVisible struct {
	Kind    VisibleKind     `json:"kind"`
	Devices []VisibleDevice `json:"devices,omitempty"`
	Err     error           `json:"-"`
}

// maxVisibleValue bounds the value parsed: a list of every GPU UUID of a
// 16-GPU host is under 1 KiB.
const maxVisibleValue = 64 << 10

// ParseNvidiaVisible parses a value of NVIDIA_VISIBLE_DEVICES as the
// NVIDIA container toolkit reads it (internal/config/image: "all",
// "none", "void" or empty, else a comma-separated list of indices, MIG
// "GPU:MIG" indices, GPU-/MIG- UUIDs, or, in CDI mode, qualified CDI
// device names). A value hidden by a snapshot's redaction is
// VisibleUnknown: presence is all that is known.
func ParseNvidiaVisible(v string) NvidiaVisible {
	if v == runtime.Redacted {
		return NvidiaVisible{Kind: VisibleUnknown}
	}
	if len(v) > maxVisibleValue {
		return NvidiaVisible{Kind: VisibleMalformed, Err: fmt.Errorf("value of %d bytes, more than any device list (%d)", len(v), maxVisibleValue)}
	}
	switch v {
	case "all":
		return NvidiaVisible{Kind: VisibleAll}
	case "none":
		return NvidiaVisible{Kind: VisibleNone}
	case "void", "":
		return NvidiaVisible{Kind: VisibleVoid}
	}
	out := NvidiaVisible{Kind: VisibleList}
	for i, tok := range strings.Split(v, ",") {
		t := strings.TrimSpace(tok)
		form := deviceForm(t)
		if form == "" {
			out.Kind = VisibleMalformed
			out.Err = fmt.Errorf("entry %d %q is neither an index, a MIG index, a GPU/MIG UUID nor a CDI device name", i+1, t)
			out.Devices = nil
			return out
		}
		out.Devices = append(out.Devices, VisibleDevice{Value: t, Form: form})
	}
	return out
}

func deviceForm(t string) string {
	switch {
	case t == "":
		return ""
	case isDigits(t):
		return "index"
	case strings.Count(t, ":") == 1 && isDigits(strings.Split(t, ":")[0]) && isDigits(strings.Split(t, ":")[1]):
		return "mig-index"
	case (strings.HasPrefix(t, "GPU-") || strings.HasPrefix(t, "MIG-")) && len(t) > 4 && isUUIDish(t[4:]):
		return "uuid"
	case parser.IsQualifiedName(t):
		return "cdi"
	}
	return ""
}

func isDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isUUIDish accepts the hex-and-dash UUIDs nvidia-smi prints
// (GPU-8ca2a6f0-...; old MIG UUIDs are MIG-GPU-.../gi/ci, so '/' too).
func isUUIDish(s string) bool {
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '-', c == '/':
		case c >= 'G' && c <= 'Z', c >= 'g' && c <= 'z': // MIG-GPU-...
		default:
			return false
		}
	}
	return true
}

// String describes the value in a few words.
func (n NvidiaVisible) String() string {
	switch n.Kind {
	case VisibleAll:
		return "all (every GPU)"
	case VisibleNone:
		return "none (no GPU; the driver's libraries only)"
	case VisibleVoid:
		return "void or empty (as if unset)"
	case VisibleUnknown:
		return "value not known (redacted in the snapshot)"
	case VisibleMalformed:
		return "malformed: " + n.Err.Error()
	}
	var vs []string
	for _, d := range n.Devices {
		vs = append(vs, d.Value)
	}
	return "devices " + strings.Join(vs, ",")
}
