package report

import (
	"fmt"
	"strings"
)

// Blocker is what kept a check from looking: the kind of a NOT_RUN
// finding's reason. The finding's fix (its Remediation) follows from the
// blocker (Why.Fix) and never from the code's catalog entry, whose
// remediation is written for the FAIL or WARN the check would have
// judged: "restart the kubelet" is no answer to "the helper that makes
// the socket calls is not installed".
type Blocker int

const (
	// Explained: the reason comes with its own fix (Why.More): a state
	// of the host that no general fix covers (not a Kubernetes node, a
	// container that has stopped, a device no node is known for).
	Explained Blocker = iota
	// NeedsPrivilege: this process may not read it. Need is the
	// capability that suffices (CAP_SYS_ADMIN, ...); "" for root.
	NeedsPrivilege
	// NeedsHelper: a companion binary that makes the call is not
	// installed. Need is its name, Where the directory it belongs in
	// (beside the binary that looked), "" when not known.
	NeedsHelper
	// HelperFailed: the companion binary ran and gave no usable answer
	// (another release, killed, crashed). Need and Where as NeedsHelper.
	HelperFailed
	// HelperUntrusted: the companion binary is there but is not run:
	// someone other than root (or the user running accel-doctor) owns it
	// or one of its directories, or may write to it (internal/helper).
	// Need is its path.
	HelperUntrusted
	// NeedsHostPath: the root is a pod's view of the host assembled from
	// mounts (--root /host) and no mount gives the host path Need.
	NeedsHostPath
	// NeedsCapture: the capture being replayed lacks the path Need (a
	// tree that never looked there, or a snapshot of another tool).
	NeedsCapture
	// EarlierFailed: a finding of an earlier layer on the same subject
	// (Earlier) stands in the way: fixing it is the fix.
	EarlierFailed
	// NeedsInput: an input only the user can give (Need: the flag, with
	// what it takes).
	NeedsInput
	// NotAsked: a flag turned the check off (Need: the flag).
	NotAsked
	// Unreadable: the file or answer is there but could not be used for
	// another reason than privilege (an I/O error, a file larger than
	// any its writer makes, bytes that do not parse). Need is its path.
	Unreadable
	// Changed: what was read changed while it was read (a process that
	// exited, a socket that went away): running again is the fix.
	Changed
	// InternalError: a bug of accel-doctor.
	InternalError
	// Unsupported: what the check needs is not offered here at all (an
	// architecture, a kernel or hypervisor that does not expose it).
	// Need says what is missing; More what to do instead.
	Unsupported
	// APIUnreachable: the Kubernetes API server (Need: its address) did
	// not answer: refused, no route, a name that does not resolve, TLS.
	APIUnreachable
	// APIUnauthorized: the API server did not accept the credentials (401).
	APIUnauthorized
	// APIForbidden: the credentials may not do it (403). Need is the
	// verb and resource, as `kubectl auth can-i` takes them ("list nodes").
	APIForbidden
	// APITimeout: the API server did not answer in time (a timeout, 504,
	// 429 that kept on, an expired continue token).
	APITimeout
	// APINotServed: the API server does not serve the API (Need: the
	// group/version, e.g. resource.k8s.io/v1).
	APINotServed
	// APINotFound: the object asked for does not exist (Need: what
	// `kubectl get` takes to show it).
	APINotFound

	blockerEnd // the number of blockers, for tests
)

// Blockers lists every blocker, for tests that hold each to a fix.
func Blockers() []Blocker {
	out := make([]Blocker, 0, int(blockerEnd))
	for b := Explained; b < blockerEnd; b++ {
		out = append(out, b)
	}
	return out
}

func (b Blocker) String() string {
	switch b {
	case Explained:
		return "explained"
	case NeedsPrivilege:
		return "needs-privilege"
	case NeedsHelper:
		return "needs-helper"
	case HelperFailed:
		return "helper-failed"
	case HelperUntrusted:
		return "helper-untrusted"
	case NeedsHostPath:
		return "needs-host-path"
	case NeedsCapture:
		return "needs-capture"
	case EarlierFailed:
		return "earlier-failed"
	case NeedsInput:
		return "needs-input"
	case NotAsked:
		return "not-asked"
	case Unreadable:
		return "unreadable"
	case Changed:
		return "changed"
	case InternalError:
		return "internal-error"
	case Unsupported:
		return "unsupported"
	case APIUnreachable:
		return "api-unreachable"
	case APIUnauthorized:
		return "api-unauthorized"
	case APIForbidden:
		return "api-forbidden"
	case APITimeout:
		return "api-timeout"
	case APINotServed:
		return "api-not-served"
	case APINotFound:
		return "api-not-found"
	}
	return fmt.Sprintf("blocker %d", int(b))
}

// Why is the reason of a NOT_RUN finding: what blocked the check (its
// kind), in words, and what the blocker names.
type Why struct {
	Blocker Blocker
	// Reason is what stopped the check, in words: the finding's Reason.
	Reason string
	// Need is what the blocker names: the capability, the helper, the
	// path, the flag, the RBAC verb and resource, the API server.
	Need string
	// Where is, for NeedsHelper and HelperFailed, the directory the
	// helper belongs in.
	Where string
	// Earlier is, for EarlierFailed, the finding in the way.
	Earlier *Finding
	// More is a sentence of the fix beyond the blocker's (for
	// Explained, the whole fix).
	More string
	// Replayed: the check read a capture; a fix that is done on the host
	// ends with taking the snapshot again.
	Replayed bool
}

// Constructors, one per blocker that needs a parameter.

// Privilege: this process may not read it; capability is what suffices
// instead of root ("" for root alone).
func Privilege(reason, capability string) Why {
	return Why{Blocker: NeedsPrivilege, Reason: reason, Need: capability}
}

// Helper: the companion binary name is not installed; it belongs in dir.
func Helper(reason, name, dir string) Why {
	return Why{Blocker: NeedsHelper, Reason: reason, Need: name, Where: dir}
}

// HelperBroken: the companion binary name ran and gave no usable answer.
func HelperBroken(reason, name, dir string) Why {
	return Why{Blocker: HelperFailed, Reason: reason, Need: name, Where: dir}
}

// Untrusted: the companion binary at path is not run (who may change it).
func Untrusted(reason, path string) Why {
	return Why{Blocker: HelperUntrusted, Reason: reason, Need: path}
}

// HostPath: the pod's --root gives no mount of the host path p.
func HostPath(reason, p string) Why { return Why{Blocker: NeedsHostPath, Reason: reason, Need: p} }

// Capture: the capture lacks the path p.
func Capture(reason, p string) Why { return Why{Blocker: NeedsCapture, Reason: reason, Need: p} }

// AfterFix: the earlier finding f stands in the way.
func AfterFix(reason string, f Finding) Why {
	return Why{Blocker: EarlierFailed, Reason: reason, Earlier: &f}
}

// Input: only the user can give it, with flag.
func Input(reason, flag string) Why { return Why{Blocker: NeedsInput, Reason: reason, Need: flag} }

// Off: flag turned the check off.
func Off(reason, flag string) Why { return Why{Blocker: NotAsked, Reason: reason, Need: flag} }

// Unusable: p is there but could not be used (I/O, size, format).
func Unusable(reason, p string) Why { return Why{Blocker: Unreadable, Reason: reason, Need: p} }

// Again: what was read changed while it was read.
func Again(reason string) Why { return Why{Blocker: Changed, Reason: reason} }

// Bug: an internal error of accel-doctor.
func Bug(reason string) Why { return Why{Blocker: InternalError, Reason: reason} }

// NotOffered: what is needed is not offered here; instead says what to
// do (it may be "").
func NotOffered(reason, what, instead string) Why {
	return Why{Blocker: Unsupported, Reason: reason, Need: what, More: instead}
}

// API: a request to the Kubernetes API server failed, of blocker b (one
// of the API blockers); need is what it names (the server, the verb and
// resource as `kubectl auth can-i` takes them, the object, the API).
func API(b Blocker, reason, need string) Why { return Why{Blocker: b, Reason: reason, Need: need} }

// Explain: a reason with its own fix.
func Explain(reason, fix string) Why { return Why{Blocker: Explained, Reason: reason, More: fix} }

// With adds a sentence to the fix.
func (w Why) With(more string) Why {
	if w.More != "" && more != "" {
		more = w.More + " " + more
	} else if more == "" {
		more = w.More
	}
	w.More = more
	return w
}

// FromCapture marks a why of a replayed capture: the host-side fix ends
// with taking the snapshot again.
func (w Why) FromCapture(replayed bool) Why {
	w.Replayed = w.Replayed || replayed
	return w
}

// snapshotAgain is how a capture is taken again.
const snapshotAgain = "take a snapshot on the host, as root (`accel-doctor snapshot node.tar.gz`), and check that"

// Fix is what to do about the blocker: the NOT_RUN finding's Remediation.
// It is never empty.
func (w Why) Fix() string {
	var s string
	switch w.Blocker {
	case Explained:
		s = w.More
		if s == "" {
			s = "See the reason: nothing accel-doctor can do removes it."
		}
		return s
	case NeedsPrivilege:
		if w.Need == "" {
			s = "Run accel-doctor as root (in a pod: `securityContext.privileged: true`)."
		} else {
			s = fmt.Sprintf("Run accel-doctor as root, or with %s (in a pod: `securityContext.capabilities.add: [\"%s\"]`).", w.Need, strings.TrimPrefix(w.Need, "CAP_"))
		}
		if w.Replayed {
			s = "The capture was taken without the privilege to read it: " + snapshotAgain + "."
		}
	case NeedsHelper:
		s = fmt.Sprintf("Install %s %s (or in the directory $ACCEL_DOCTOR_HELPER_DIR names): it ships with accel-doctor, of the same release; accel-doctor does not look for it on PATH.", orDefault(w.Need, "the helper"), beside(w.Where))
		if w.Replayed {
			s += " Then " + snapshotAgain + "."
		}
	case HelperUntrusted:
		s = fmt.Sprintf("Install the helper of this accel-doctor's release so that only root (or the user running accel-doctor) can change it: `chown root:root %[1]s && chmod 0755 %[1]s`, in directories owned likewise and writable by nobody else; accel-doctor runs no other.", orDefault(w.Need, "the helper the reason names"))
	case HelperFailed:
		s = fmt.Sprintf("Install the %s of this accel-doctor's release %s (the one found gave no answer it can read: the reason has its error), or run it by hand to see why it fails.", orDefault(w.Need, "helper"), beside(w.Where))
		if w.Replayed {
			s += " Then " + snapshotAgain + "."
		}
	case NeedsHostPath:
		s = fmt.Sprintf("Mount the host's %s into the pod (a hostPath volume) under the directory given as --root (the host's / at /host with --root /host gives every path), or run accel-doctor on the host.", orDefault(w.Need, "file system"))
	case NeedsCapture:
		s = fmt.Sprintf("This root holds no %s (a tree, or a capture, holds only what it copied): %s instead.", orDefault(w.Need, "such path"), snapshotAgain)
	case EarlierFailed:
		if f := w.Earlier; f != nil {
			s = fmt.Sprintf("Fix %s (%s, layer %d) first, then run accel-doctor again", f.Code, f.Subject, int(f.Layer))
			if f.Remediation != "" {
				s += ": " + strings.TrimSuffix(f.Remediation, ".") + "."
			} else {
				s += " (`accel-doctor explain " + f.Code + "`)."
			}
		} else {
			s = "Fix the earlier layer's FAIL on this subject first, then run accel-doctor again."
		}
	case NeedsInput:
		s = fmt.Sprintf("Give %s.", orDefault(w.Need, "the missing input"))
	case NotAsked:
		s = fmt.Sprintf("Run it again without %s to have it judged.", orDefault(w.Need, "the flag that turned it off"))
	case Unreadable:
		if w.Need != "" {
			s = fmt.Sprintf("Look at %s by hand (`ls -ld %s`, and a file's first bytes: `head -c 4096 %s`): it is not what its writer leaves there; if it is, report a bug with `accel-doctor snapshot snap.tar.gz`.", w.Need, w.Need, w.Need)
		} else {
			s = "Look at what the reason names by hand: it is not what its writer leaves there; if it is, report a bug with `accel-doctor snapshot snap.tar.gz`."
		}
		if w.Replayed {
			s += " On a capture, " + snapshotAgain + "."
		}
	case Changed:
		s = "Run accel-doctor again: what it read changed while it looked."
	case InternalError:
		s = "Report a bug with the output of `accel-doctor snapshot snap.tar.gz` and this report."
	case Unsupported:
		s = fmt.Sprintf("Nothing here offers %s.", orDefault(w.Need, "it"))
	case APIUnreachable:
		s = fmt.Sprintf("Check that the API server %sis up and reachable from here: the kubeconfig's server (`kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}'`), the context (--context; `kubectl config current-context`), and `kubectl get --raw /readyz`.", orDefault(w.Need+" ", ""))
	case APIUnauthorized:
		s = "The API server does not accept these credentials: renew them (an expired token or client certificate in the kubeconfig; a cloud cluster's get-credentials command), then check with `kubectl auth whoami`."
	case APIForbidden:
		if w.Need == "" {
			s = "The user may not make this request: grant the verb on the resource the reason names (an RBAC Role or ClusterRole, bound to the user); `kubectl auth can-i VERB RESOURCE` says whether it may."
		} else {
			s = fmt.Sprintf("The user may not %s: grant it (an RBAC Role or ClusterRole with that verb on that resource, bound to the user); `kubectl auth can-i %s` says whether it may.", w.Need, w.Need)
		}
	case APITimeout:
		s = "The API server did not answer in time: check its health (`kubectl get --raw /readyz`) and the network to it, then run again (a very large list: narrow it with -n NAMESPACE)."
	case APINotServed:
		s = fmt.Sprintf("The API server does not serve %s: `kubectl api-resources` lists what it serves (resource.k8s.io/v1 is served from Kubernetes 1.34).", orDefault(w.Need, "this API"))
	case APINotFound:
		s = fmt.Sprintf("Check the name and namespace: `kubectl get %s`.", orDefault(w.Need, "OBJECT"))
	default:
		s = "See the reason."
	}
	if w.More != "" {
		s += " " + w.More
	}
	return s
}

func beside(dir string) string {
	if dir == "" {
		return "beside the accel-doctor binary (in the same directory)"
	}
	return "beside the accel-doctor binary, in " + dir
}

func orDefault(s, d string) string {
	if strings.TrimSpace(s) == "" {
		return d
	}
	return s
}

// CouldNotLook makes f a NOT_RUN finding for why: its status, its reason
// and the fix that follows from the blocker.
func (f *Finding) CouldNotLook(why Why) {
	f.Status = NotRun
	f.Reason = why.Reason
	f.Remediation = why.Fix()
}
