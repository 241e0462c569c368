package diagnose

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/dra"
	"github.com/accel-doctor/accel-doctor/internal/driver"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 6, node side: what the kubelet's device manager and its plugins
// left on this node (internal/kubelet reads it; this file judges). Every
// judgement follows the facts internal/kubelet.Codes names for its code;
// the decisions that are this file's own are commented where they are
// made.

// layer6Codes turns a layer-6 reader's proposed codes (internal/kubelet's
// and internal/dra's share the type) into catalog entries.
func layer6Codes(cs []kubelet.ProposedCode) []Code {
	out := make([]Code, 0, len(cs))
	for _, c := range cs {
		out = append(out, Code{Code: c.Code, Layer: report.LayerKube, Title: c.Title, Explain: c.Explain, Remediation: c.Remediation})
	}
	return out
}

// layer6Names are the codes' names, for a Check's Codes.
func layer6Names(cs []kubelet.ProposedCode) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Code)
	}
	return out
}

func kubeCodes() []Code { return layer6Codes(kubelet.Codes) }

func kubeCheck() Check {
	return Check{ID: "kube.node", Layer: report.LayerKube,
		Title: "the kubelet's device-plugin sockets, its checkpoint and PodResources on this node",
		Codes: layer6Names(kubelet.Codes), Run: checkKube}
}

// kubeTimeout bounds each socket's connect and call. A kubelet or plugin
// answers a local call in well under a millisecond; a second is a server
// that is stuck, not a slow one.
const kubeTimeout = time.Second

// Kubelet reads the node's kubelet state once per run.
func (e *Env) Kubelet() (*kubelet.Node, error) {
	return memo(e, "kubelet.node", func() (*kubelet.Node, error) {
		return kubelet.Read(context.Background(), e.Root, kubelet.Options{KubeletDir: e.Opts.KubeletDir, Timeout: kubeTimeout, RPC: e.Opts.KubeletRPC})
	})
}

func checkKube(e *Env, out *Out) {
	n, err := e.Kubelet()
	if err != nil {
		out.NotRun("KUBELET_NOT_READ", "kubelet", "the kubelet's state could not be read", kubeletReadWhy(err))
		return
	}
	dirEv := Ev(n.Dir, string(n.DirState))
	switch n.DirState {
	case kubelet.Absent:
		out.NotRun("KUBELET_NOT_A_NODE", "kubelet", "no kubelet device-plugin directory: not a Kubernetes node (or another --root-dir)",
			report.Explain("the directory "+n.Dir+" does not exist",
				"Nothing to do on a host that is not a Kubernetes node. On a node whose kubelet runs with another --root-dir (`systemctl cat kubelet` shows it), give that directory with --kubelet-root-dir."), dirEv)
		return
	case kubelet.NotCaptured, kubelet.Unreadable, kubelet.Denied:
		why := n.DirErr
		if n.DirState == kubelet.NotCaptured && (why == "" || n.Replayed) {
			why = "the snapshot did not capture " + n.Dir
		}
		out.NotRun("KUBELET_NOT_READ", "kubelet", "the kubelet's device-plugin directory could not be read", e.stateWhy(why, n.DirState, n.Dir, n.Replayed), dirEv)
		return
	}
	served, sock := judgeKubeletSocket(e, out, n)
	judgePluginSockets(e, out, n, served)
	judgeCheckpoint(e, out, n)
	switch {
	case served:
		judgeNoPlugin(e, out, n, nil)
		judgeOrphanResources(out, n)
	case sock != nil && sock.Status == report.Fail:
		// With no kubelet serving, no plugin can register: the devices
		// that need one follow from kubelet.sock's finding.
		judgeNoPlugin(e, out, n, sock)
	}
	e.judgePodResources(out, n)
}

// needsPlugin lists the accelerators layers 1-5 found working on the host
// side: bound to a driver that a vendor's plugin serves, with no FAIL
// below this layer. Those are the devices a plugin must advertise.
func (e *Env) needsPlugin() map[string][]string {
	byDriver := map[string][]string{}
	for _, d := range e.Accelerators() {
		bdf := d.Address.String()
		b := e.Binding(d)
		if b.State != driver.Bound || b.Driver == "" {
			continue
		}
		if _, ok := kubelet.VendorPluginFor(b.Driver); !ok {
			continue
		}
		if _, failed := e.FailedBelow(bdf, report.LayerKube); failed {
			continue
		}
		byDriver[b.Driver] = append(byDriver[b.Driver], bdf)
	}
	return byDriver
}

// judgeKubeletSocket reports kubelet.sock and says whether it is served,
// with its finding.
func judgeKubeletSocket(e *Env, out *Out, n *kubelet.Node) (bool, *report.Finding) {
	if n.Kubelet == nil {
		// FAIL only when devices need a plugin: a node without
		// accelerators, or a kubelet that is stopped on purpose, is
		// worth a WARN.
		st, summary := report.Warn, "no kubelet.sock: the kubelet is not running, so no device plugin can register"
		if need := e.needsPlugin(); len(need) > 0 {
			st = report.Fail
			summary += fmt.Sprintf("; %d accelerator(s) with a driver need one", countAll(need))
		}
		f := *out.Add("KUBELET_SOCKET_MISSING", st, "kubelet.sock", summary, Ev(n.Dir+"/kubelet.sock", "absent"))
		return false, &f
	}
	s := n.Kubelet
	ev := socketEvidence(s)
	switch {
	case s.Dial.OK():
		out.Add("KUBELET_SOCKET_OK", report.Pass, "kubelet.sock", "kubelet.sock is served by a gRPC server", ev...)
		return true, nil
	case couldNotLook(s.Dial.Answer):
		out.NotRun("KUBELET_SOCKET_NOT_ANSWERING", "kubelet.sock", "kubelet.sock could not be tried", dialWhy(s.Dial, n.Replayed), ev...)
		return false, nil
	}
	f := *out.Add("KUBELET_SOCKET_NOT_ANSWERING", report.Fail, "kubelet.sock", "kubelet.sock is there but no kubelet answers on it ("+string(s.Dial.Answer)+")", ev...)
	return false, &f
}

// couldNotLook: answers that say nothing of the server (this process may
// not connect; the socket vanished while we looked; no call could be
// made: kubeletrpc.Answer.CouldNotLook).
func couldNotLook(a kubelet.Answer) bool { return a.CouldNotLook() }

func socketEvidence(s *kubelet.Socket) []report.Evidence {
	ev := []report.Evidence{Ev(s.Path, s.Type)}
	if !s.ModTime.IsZero() {
		ev = append(ev, Ev(s.Path+" (mtime)", s.ModTime.UTC().Format(time.RFC3339Nano)))
	}
	if s.Dial.Method != "" {
		v := string(s.Dial.Answer)
		if s.Dial.Code != "" {
			v += " (" + s.Dial.Code + ")"
		}
		if s.Dial.Err != "" {
			v += ": " + s.Dial.Err
		}
		ev = append(ev, Ev(s.Dial.Method, v))
	}
	if s.Resource != "" {
		ev = append(ev, Ev("resource (from the socket's name)", s.Resource+", by "+s.ResourceHint))
	}
	return ev
}

func judgePluginSockets(e *Env, out *Out, n *kubelet.Node, kubeletServed bool) {
	byResource := map[string][]*kubelet.Socket{}
	for _, s := range n.Plugins {
		ev := socketEvidence(s)
		if n.Kubelet != nil && !n.Kubelet.ModTime.IsZero() {
			ev = append(ev, Ev(n.Kubelet.Path+" (mtime)", n.Kubelet.ModTime.UTC().Format(time.RFC3339Nano)))
		}
		subj := s.Name
		switch a := s.Dial.Answer; {
		case a == kubelet.NotSocket:
			out.Add("KUBELET_PLUGIN_SOCKET_NOT_SOCKET", report.Warn, subj, "a file named like a plugin socket is not a socket", ev...)
		case a == kubelet.Refused:
			out.Add("KUBELET_PLUGIN_SOCKET_DEAD", report.Fail, subj, "no plugin listens on this socket any more (connection refused)", ev...)
		case couldNotLook(a):
			out.NotRun("KUBELET_PLUGIN_NOT_ANSWERING", subj, "the plugin socket could not be tried", dialWhy(s.Dial, n.Replayed), ev...)
		case !s.Dial.OK():
			out.Add("KUBELET_PLUGIN_NOT_ANSWERING", report.Fail, subj, "a plugin socket accepts no gRPC call ("+string(a)+")", ev...)
		case s.OlderThanKubelet && !confirmed(n, s.Resource) && n.Kubelet.ModTime.Sub(s.ModTime) >= staleGrace:
			out.Add("KUBELET_PLUGIN_SOCKET_STALE", report.Fail, subj, "the plugin answers on a socket older than kubelet.sock: it did not register with the running kubelet", ev...)
		default:
			if s.Resource != "" {
				byResource[s.Resource] = append(byResource[s.Resource], s)
			}
			judgeRegistration(e, out, n, s, kubeletServed, ev)
		}
	}
	rs := make([]string, 0, len(byResource))
	for r := range byResource {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	for _, r := range rs {
		ss := byResource[r]
		if len(ss) < 2 {
			continue
		}
		var ev []report.Evidence
		var names []string
		for _, s := range ss {
			names = append(names, s.Name)
			ev = append(ev, socketEvidence(s)...)
		}
		out.Add("KUBELET_PLUGIN_DUPLICATE", report.Warn, r,
			fmt.Sprintf("%d plugin instances serve %s: %s", len(ss), r, strings.Join(names, ", ")), ev...)
	}
}

// staleGrace: a plugin socket older than kubelet.sock by less than this
// may have been bound in the gap between the kubelet's sweep of the
// directory and its bind of kubelet.sock (milliseconds: a plugin that
// serves again as soon as its socket is removed lands there about once
// in 40-90 restarts, e2e/deviceplugin TestOursSocketOlderThanKubeletSockIsNotStale),
// and registered once kubelet.sock appeared: its age proves nothing.
const staleGrace = time.Second

// confirmed: the running kubelet has devices of the resource:
// PodResources lists it allocatable, or a checkpoint written after
// kubelet.sock was bound lists healthy devices of it (the kubelet writes
// RegisteredDevices from the devices plugins reported since it started;
// a resource restored from an earlier checkpoint has an empty list).
func confirmed(n *kubelet.Node, resource string) bool {
	if resource == "" {
		return false
	}
	if len(n.PodResources.AllocatableIDs()[resource]) > 0 {
		return true
	}
	return n.Checkpoint != nil && n.Kubelet != nil && len(n.Checkpoint.Registered[resource]) > 0 &&
		!n.CheckpointModTime.IsZero() && n.CheckpointModTime.After(n.Kubelet.ModTime)
}

// judgeRegistration decides, for an answering socket that is not stale,
// whether the kubelet holds its resource.
func judgeRegistration(e *Env, out *Out, n *kubelet.Node, s *kubelet.Socket, kubeletServed bool, ev []report.Evidence) {
	ok := "the plugin answers GetDevicePluginOptions on a socket newer than kubelet.sock"
	if s.OlderThanKubelet {
		ok = "the plugin answers GetDevicePluginOptions (its socket predates kubelet.sock by " + n.Kubelet.ModTime.Sub(s.ModTime).String() + ")"
	}
	if s.Resource == "" {
		out.Add("KUBELET_PLUGIN_OK", report.Pass, s.Name, ok+" (its resource is not known from its name)", ev...)
		return
	}
	if confirmed(n, s.Resource) {
		seen := n.Resources()[s.Resource]
		out.Add("KUBELET_PLUGIN_OK", report.Pass, s.Name, ok+"; the running kubelet has devices of "+s.Resource+" ("+strings.Join(seen, ", ")+")", ev...)
		return
	}
	// Absence is conclusive only from a checkpoint the kubelet rewrote
	// after the socket was bound: an accepted registration makes it
	// write one with the resource at once, even with no device.
	// PodResources' allocatable list is only evidence beside it (a
	// resource with no healthy device is absent there too).
	cpAfter := n.Checkpoint != nil && !n.CheckpointModTime.IsZero() && !s.ModTime.IsZero() && n.CheckpointModTime.After(s.ModTime.Add(time.Second))
	prOK := n.PodResources != nil && n.PodResources.Allocatable.Succeeded()
	listed := false
	if n.Checkpoint != nil {
		_, listed = n.Checkpoint.Registered[s.Resource]
	}
	if kubeletServed && cpAfter && !listed {
		ev = append(ev, Ev(n.CheckpointPath+" (mtime)", n.CheckpointModTime.UTC().Format(time.RFC3339Nano)),
			Ev(n.CheckpointPath+" RegisteredDevices", strings.Join(sortedKeys(n.Checkpoint.Registered), ", ")))
		if prOK {
			ev = append(ev, Ev(n.PodResources.Path+" GetAllocatableResources", "no "+s.Resource))
		}
		out.Add("KUBELET_PLUGIN_NOT_REGISTERED", report.Fail, s.Name,
			"the plugin serves "+s.Resource+" but the kubelet has no record of it: its registration failed", ev...)
		return
	}
	// What the API server says the kubelet advertises settles it.
	ask := "Ask the API server what the node advertises: `kubectl get node NODE -o jsonpath='{.status.allocatable}'` lists " + s.Resource + " once the registration holds."
	why := report.Explain("the checkpoint was not rewritten since the socket was bound, and PodResources does not confirm it", ask)
	switch {
	case !kubeletServed:
		why = report.Explain("kubelet.sock is not served", "Make kubelet.sock answer first (its finding above says how), then run again: a plugin registers only with a serving kubelet.")
	case listed:
		why = report.Explain("the checkpoint lists "+s.Resource+" with no healthy device: the plugin registered and reports none healthy, or has not reported since the kubelet started",
			"Read the plugin's log for its health reports (`kubectl -n NAMESPACE logs PLUGIN-POD`). "+ask)
	case n.Checkpoint == nil:
		text := "no readable checkpoint (" + string(n.CheckpointState) + "), and PodResources does not list " + s.Resource
		why = report.Explain(text, ask)
		if n.CheckpointState != kubelet.Absent {
			why = e.stateWhy(text, n.CheckpointState, n.CheckpointPath, n.Replayed).With(ask)
		}
	}
	out.NotRun("KUBELET_PLUGIN_REGISTRATION_UNKNOWN", s.Name, "the plugin answers; whether the kubelet holds "+s.Resource+" is not known", why, ev...)
}

func sortedKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func countAll(m map[string][]string) int {
	c := 0
	for _, v := range m {
		c += len(v)
	}
	return c
}

func judgeCheckpoint(e *Env, out *Out, n *kubelet.Node) {
	cpEv := Ev(n.CheckpointPath, string(n.CheckpointState))
	switch n.CheckpointState {
	case kubelet.Absent, kubelet.NotCaptured:
		return // no allocations yet (a kubelet writes it on a device update), or not captured: nothing to judge
	case kubelet.Unreadable, kubelet.Denied:
		// Could not read it (permission, a FIFO, socket or directory
		// where the file should be, a link loop, too large): nothing is
		// known of what the kubelet reads there. Only a file that was
		// read and does not parse is the FAIL.
		if n.Checkpoint == nil && !n.CheckpointMalformed {
			out.NotRun("KUBELET_CHECKPOINT_CORRUPT", "kubelet_internal_checkpoint", "the checkpoint could not be read", e.stateWhy(n.CheckpointErr, n.CheckpointState, n.CheckpointPath, n.Replayed), cpEv)
			return
		}
		out.Add("KUBELET_CHECKPOINT_CORRUPT", report.Fail, "kubelet_internal_checkpoint", "the checkpoint does not parse: the kubelet will start without its allocations",
			cpEv, Ev(n.CheckpointPath, n.CheckpointErr))
		return
	}
	cp := n.Checkpoint
	if cp == nil {
		return
	}
	if !cp.ChecksumOK {
		out.Add("KUBELET_CHECKPOINT_CORRUPT", report.Fail, "kubelet_internal_checkpoint", "the checkpoint's checksum does not verify: the kubelet will refuse it",
			Ev(n.CheckpointPath+" Checksum", fmt.Sprint(cp.Stored)), Ev("computed", fmt.Sprint(cp.Computed)))
	}
	if cp.Format == kubelet.FormatV1 {
		out.Add("KUBELET_CHECKPOINT_OLD_FORMAT", report.Warn, "kubelet_internal_checkpoint", "the checkpoint is in the format of kubelets up to 1.19", cpEv)
	}
	if n.BootIDDiffers {
		out.Add("KUBELET_NODE_REBOOTED", report.Pass, "kubelet_internal_checkpoint", "the node rebooted since the kubelet last wrote its checkpoint",
			Ev(n.CheckpointPath+" BootID", cp.BootID), Ev(kubelet.BootIDPath, n.BootID)).AsContext()
	}
	for _, d := range n.Devices {
		if d.BDF != "" && !e.WantDevice(d.BDF) {
			continue // a run about other devices (--device, a container's)
		}
		ev := []report.Evidence{Ev("device ID", d.ID+" ("+string(d.Form)+")"), Ev("host", d.Evidence)}
		switch {
		case d.Host == kubelet.HostAbsent:
			out.Add("KUBELET_CHECKPOINT_ABSENT_DEVICE", report.Fail, d.ID,
				"the checkpoint allocates "+d.Resource+" device "+d.ID+", which this node does not have", ev...)
		case d.Host == kubelet.HostPresent && d.Registered != nil && !*d.Registered && (d.Allocatable == nil || !*d.Allocatable):
			out.Add("KUBELET_ALLOCATED_DEVICE_UNHEALTHY", report.Warn, d.ID,
				"allocated device "+d.ID+" is on the host but its plugin no longer reports it healthy", ev...)
		}
	}
	for _, d := range n.Allocatable {
		if d.Host == kubelet.HostAbsent && (d.BDF == "" || e.WantDevice(d.BDF)) {
			out.Add("KUBELET_ALLOCATABLE_DEVICE_ABSENT", report.Fail, d.ID,
				"the plugin advertises "+d.Resource+" device "+d.ID+", which this node does not have",
				Ev("device ID", d.ID+" ("+string(d.Form)+")"), Ev("host", d.Evidence))
		}
	}
}

// judgeNoPlugin: devices that work on the host side, and who serves
// them: a device plugin of the vendor (its sockets or resources), or a
// live, registered DRA driver of the vendor (kubelet.VendorPlugin's
// DRADrivers). A DRA-only node needs no device plugin. Where neither
// serves them, the FAIL names both sides, and follows from what explains
// it: the kubelet not serving, or the vendor's DRA driver installed but
// down. below is kubelet.sock's finding when the kubelet does not serve
// (no plugin can register then), nil otherwise.
func judgeNoPlugin(e *Env, out *Out, n *kubelet.Node, below *report.Finding) {
	need := e.needsPlugin()
	if len(need) == 0 {
		return
	}
	dn, draErr := e.DRA()
	for _, drv := range sortedKeys(need) {
		p := n.PluginFor(drv)
		// A socket of the vendor's naming that is there, answering or
		// not, has its own finding (dead, stale, not registered): the
		// plugin is deployed.
		if len(p.Seen) > 0 || len(p.Sockets) > 0 {
			continue
		}
		if below == nil {
			if served := draServing(dn, p.Vendor.DRADrivers); served != "" {
				for _, bdf := range need[drv] {
					out.Add("KUBELET_ACCELERATOR_SERVED_BY_DRA", report.Pass, bdf,
						fmt.Sprintf("%s is bound to %s with its nodes and DRA driver %s of its vendor is registered with the kubelet (no device plugin needed)", bdf, drv, served),
						Ev(dn.RegistryDir, "live registration of "+served))
				}
				continue
			}
		}
		known := sortedKeys(n.Resources())
		if len(known) == 0 {
			known = []string{"none"}
		}
		dpSide := fmt.Sprintf("no %s device plugin (%s)", p.Vendor.Plugin, strings.Join(p.Vendor.Resources, " or "))
		draSide := ""
		if len(p.Vendor.DRADrivers) > 0 {
			draSide = " and no DRA driver (" + strings.Join(p.Vendor.DRADrivers, " or ") + ")"
		}
		ev := []report.Evidence{Ev(n.Dir, "plugin sockets: "+socketNames(n)), Ev("resources the node knows", strings.Join(known, ", "))}
		cause := below
		var causeCode, causeSubject string
		if cause == nil && dn != nil {
			causeCode, causeSubject = draDriverDown(dn, p.Vendor.DRADrivers)
		}
		if below == nil {
			// Whether a DRA driver serves the devices must be known
			// before the FAIL: a registry that could not be read, or
			// a live DRA driver of no known vendor (a generic one may
			// publish them), leaves it open.
			var why report.Why
			switch {
			case draErr != nil:
				why = kubeletReadWhy(draErr)
			case dn.RegistryState.CouldNotRead():
				why = e.stateWhy(dn.RegistryErr, dn.RegistryState, dn.RegistryDir, dn.Replayed)
			default:
				if other := otherDRADrivers(dn); len(other) > 0 {
					why = report.Explain("DRA driver(s) "+strings.Join(other, ", ")+" of no vendor known here are registered: whether they publish these devices is in the node's ResourceSlices, which this check does not read",
						"List what the drivers publish for this node: `kubectl get resourceslices --field-selector spec.nodeName=NODE -o yaml`; the devices of "+drv+" must be among them, or the vendor's device plugin or DRA driver must run here.")
				}
			}
			if why.Reason != "" {
				for _, bdf := range need[drv] {
					out.NotRun("KUBELET_NO_PLUGIN_FOR_ACCELERATOR", bdf,
						fmt.Sprintf("%s is bound to %s with its nodes and %s serves it; whether a DRA driver does is not known", bdf, drv, dpSide), why, ev...)
				}
				continue
			}
		}
		for _, bdf := range need[drv] {
			f := out.Add("KUBELET_NO_PLUGIN_FOR_ACCELERATOR", report.Fail, bdf,
				fmt.Sprintf("%s is bound to %s with its nodes, and %s%s serves it", bdf, drv, dpSide, draSide), ev...)
			switch {
			case cause != nil:
				f.Follows(cause.Code, cause.Subject)
			case causeCode != "":
				f.Follows(causeCode, causeSubject)
			}
		}
	}
}

// draServing is the first of the vendor's DRA drivers that has a live,
// supported registration on the node, or "".
func draServing(dn *dra.Node, drivers []string) string {
	if dn == nil {
		return ""
	}
	for _, d := range drivers {
		if dn.Registered(d) {
			return d
		}
	}
	return ""
}

// otherDRADrivers are the registered DRA drivers that no vendor row
// names.
func otherDRADrivers(dn *dra.Node) []string {
	var out []string
	for _, d := range dn.Drivers() {
		if _, ok := kubelet.VendorFor(d); !ok && dn.Registered(d) {
			out = append(out, d)
		}
	}
	return out
}

// draDriverDown names the finding of layer 6's kube.dra check that says
// why one of the vendor's DRA drivers is there and not serving: its
// directory with dead sockets and no registration (DRA_DRIVER_NOT_RUNNING),
// a serving directory with no registration (DRA_DRIVER_NOT_REGISTERED),
// a dead registration socket (DRA_REGISTRATION_DEAD), or an endpoint that
// refuses (DRA_ENDPOINT_MISSING). The subjects are those judgeDRARegistration
// and checkDRA give. "" when none of them applies.
func draDriverDown(dn *dra.Node, drivers []string) (code, subject string) {
	for _, name := range drivers {
		for _, d := range dn.DriverDirs {
			if d.Name != name {
				continue
			}
			switch {
			case d.NotRunning():
				return "DRA_DRIVER_NOT_RUNNING", name
			case d.NotRegistered():
				return "DRA_DRIVER_NOT_REGISTERED", name
			}
		}
		for _, r := range dn.Registrations {
			switch {
			case r.Info == nil && r.Dial.Answer == kubelet.Refused && (r.Name == name+"-reg.sock" || strings.HasPrefix(r.Name, name+"-") && strings.HasSuffix(r.Name, "-reg.sock")):
				return "DRA_REGISTRATION_DEAD", r.Name
			case r.Info != nil && r.Info.Name == name && r.Info.Type == dra.TypeDRA && r.Endpoint != nil && r.Endpoint.Dial.Answer != dra.Connected && !r.Endpoint.Dial.Answer.CouldNotLook():
				return "DRA_ENDPOINT_MISSING", name
			}
		}
	}
	return "", ""
}

func socketNames(n *kubelet.Node) string {
	if len(n.Plugins) == 0 {
		return "none"
	}
	var s []string
	for _, p := range n.Plugins {
		s = append(s, p.Name)
	}
	return strings.Join(s, ", ")
}

func (e *Env) judgePodResources(out *Out, n *kubelet.Node) {
	pr := n.PodResources
	switch {
	case pr == nil:
		sock := kubelet.PodResourcesSocket(n.KubeletDir)
		reason := "no PodResources socket at " + sock
		why, gap := e.gapWhy(sock, "")
		if gap {
			why.Reason = reason + " (" + why.Reason + ")"
		} else {
			why = report.Explain(reason, "A kubelet serves PodResources there from Kubernetes 1.15 on (feature gate KubeletPodResources, on by default); one older, or with the gate off, does not, and the other findings of this layer stand without it. `ls -l "+sock+"` shows whether it is there.")
		}
		out.NotRun("KUBELET_PODRESOURCES_UNAVAILABLE", "pod-resources", "which container holds which device is not known", why)
	case !pr.List.Succeeded():
		reason := "PodResources List: " + dialText(pr.List)
		why := report.Explain(reason, "The kubelet did not answer List on its PodResources socket: its log says why (`journalctl -u kubelet | grep -i podresources`); the other findings of this layer stand without it.")
		if pr.List.Answer.CouldNotLook() {
			why = dialWhy(pr.List, n.Replayed)
			why.Reason = reason
		}
		out.NotRun("KUBELET_PODRESOURCES_UNAVAILABLE", "pod-resources", "which container holds which device is not known", why, Ev(pr.Path, string(pr.List.Answer)))
	}
}

// judgeOrphanResources: resources the kubelet's checkpoint holds with no
// plugin socket for them. Only when every socket's resource is known: a
// socket of unknown naming may be the one.
func judgeOrphanResources(out *Out, n *kubelet.Node) {
	if n.Checkpoint == nil || !n.Checkpoint.ChecksumOK {
		return
	}
	// A socket of unknown resource weakens only what it could change: if
	// it answers, it may be any resource's plugin, so an orphan is not
	// known (NOT_RUN naming it); a dead one serves nothing. A resource
	// PodResources lists allocatable has a live plugin, whatever its
	// socket is called.
	have := map[string]bool{}
	var unknown []string
	for _, s := range n.Plugins {
		switch {
		case s.Resource != "":
			have[s.Resource] = true
		case s.Dial.OK():
			unknown = append(unknown, s.Name)
		}
	}
	// Each live socket is one registration, of one resource: the
	// resources PodResources lists allocatable with no socket of their
	// naming are served by sockets of unknown naming, one each at least.
	// When they account for every such socket, none is left to serve an
	// orphan.
	served := 0
	for r, ids := range n.PodResources.AllocatableIDs() {
		if len(ids) > 0 && !have[r] {
			have[r] = true
			served++
		}
	}
	if len(unknown) <= served {
		unknown = nil
	}
	written := Ev(n.CheckpointPath+" (mtime)", n.CheckpointModTime.UTC().Format(time.RFC3339Nano))
	byRunning := n.Kubelet != nil && !n.CheckpointModTime.IsZero() && n.CheckpointModTime.After(n.Kubelet.ModTime)
	for _, r := range sortedKeys(n.Checkpoint.Registered) {
		if have[r] {
			continue
		}
		st, who := report.Warn, "a checkpoint older than kubelet.sock"
		if byRunning {
			st, who = report.Fail, "the running kubelet's checkpoint"
		}
		if len(unknown) > 0 {
			out.NotRun("KUBELET_RESOURCE_NO_PLUGIN", r, fmt.Sprintf("%s holds %s; whether a plugin serves it is not known", who, r),
				report.Explain("plugin socket(s) "+strings.Join(unknown, ", ")+" answer and their resource is not known from their names: one may serve "+r,
					"Ask the kubelet what it serves: `kubectl get node NODE -o jsonpath='{.status.allocatable}'` lists "+r+" while its plugin is registered."),
				Ev(n.CheckpointPath+" RegisteredDevices["+r+"]", strings.Join(n.Checkpoint.Registered[r], ", ")), written)
			continue
		}
		out.Add("KUBELET_RESOURCE_NO_PLUGIN", st, r,
			fmt.Sprintf("%s holds %s (%d healthy device(s) at its last write) and no plugin socket serves it", who, r, len(n.Checkpoint.Registered[r])),
			Ev(n.CheckpointPath+" RegisteredDevices["+r+"]", strings.Join(n.Checkpoint.Registered[r], ", ")), written,
			Ev(n.Dir, "plugin sockets: "+socketNames(n)))
	}
}
