package diagnose

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/accel-doctor/accel-doctor/internal/dra"
	"github.com/accel-doctor/accel-doctor/internal/kubelet"
	"github.com/accel-doctor/accel-doctor/internal/report"
)

// Layer 6, DRA on the node: the kubelet's plugin registrations, the
// drivers' directories, the kubelet's DRA state and the CDI devices of
// its prepared claims (internal/dra reads; this file judges, by the facts
// dra.Codes names for each code).

func draCodes() []Code { return layer6Codes(dra.Codes) }

func draCheck() Check {
	return Check{ID: "kube.dra", Layer: report.LayerKube,
		Title: "DRA drivers' registrations, the kubelet's DRA state and its claims' CDI devices on this node",
		Codes: layer6Names(dra.Codes), Run: checkDRA, Prefetch: prefetchKube}
}

// prefetchKube starts layer 6's two readers while the layers before it
// run, each beside the other: on a node each makes its calls on the
// kubelet's sockets through a run of accel-doctor-kubelet (Options.
// KubeletRPC), and those runs were most of a check's time there, one after
// the other. The DRA reader asks for the kubelet reader's checkpoint last
// (DevicePluginCheckpointFrom), and memo makes it wait for that read.
func prefetchKube(e *Env) {
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() { _ = recover() }() // memo keeps a reader's panic for its check to report
		_, _ = e.Kubelet()
	})
	defer wg.Wait()
	_, _ = e.DRA()
}

// DRA reads the node's DRA side once per run. The device-plugin
// checkpoint (for double advertising) is the kubelet layer's read, which
// a snapshot keeps in its capture.
func (e *Env) DRA() (*dra.Node, error) {
	return memo(e, "dra.node", func() (*dra.Node, error) {
		o := dra.Options{KubeletDir: e.Opts.KubeletDir, Timeout: kubeTimeout, CDIDirs: e.Opts.CDISpecDirs, RPC: e.Opts.KubeletRPC,
			DevicePluginCheckpointFrom: func() *kubelet.Checkpoint {
				if n, err := e.Kubelet(); err == nil && n != nil {
					return n.Checkpoint
				}
				return nil
			}}
		return dra.Read(context.Background(), e.Root, o)
	})
}

func checkDRA(e *Env, out *Out) {
	n, err := e.DRA()
	if err != nil {
		out.NotRun("DRA_STATE_NOT_READ", "dra", "the node's DRA side could not be read", kubeletReadWhy(err))
		return
	}
	// No registry, no plugins directory and no state that could be read:
	// no DRA on this node, or a capture without the kubelet's directory:
	// nothing to add to what the kubelet check says of the node.
	looked := func(s kubelet.State) bool { return s == kubelet.Present || s.CouldNotRead() }
	if !looked(n.RegistryState) && !looked(n.PluginsState) && !looked(n.StateState) {
		return
	}
	for _, r := range n.Registrations {
		judgeDRARegistration(out, r, n.Replayed)
	}
	for _, d := range n.DriverDirs {
		switch {
		case d.NotRegistered():
			out.Add("DRA_DRIVER_NOT_REGISTERED", report.Fail, d.Name,
				"driver "+d.Name+" serves its plugin directory but has no live registration in "+n.RegistryDir,
				Ev(d.Path, "serving"), Ev(n.RegistryDir, fmt.Sprintf("%d registration(s)", len(n.Registrations))))
		case d.NotRunning():
			ev := []report.Evidence{}
			for _, s := range d.Sockets {
				ev = append(ev, Ev(s.Path, dialText(s.Dial)))
			}
			ev = append(ev, Ev(n.RegistryDir, fmt.Sprintf("%d registration(s), none of %s", len(n.Registrations), d.Name)))
			out.Add("DRA_DRIVER_NOT_RUNNING", report.Fail, d.Name,
				"driver "+d.Name+" is installed but its kubelet plugin is not running: its socket refuses connections and it has no registration; its pods' claims fail with \"DRA driver "+d.Name+" is not registered\"", ev...)
		}
	}
	e.judgeDRAState(out, n)
	judgeClaimDrivers(out, n)
	for _, c := range n.CDI {
		switch c.Resolve {
		case dra.Unresolved, dra.Invalid:
			why := "no CDI spec in " + strings.Join(n.CDIDirs, ", ") + " declares it"
			ev := []report.Evidence{Ev(n.StatePath, "claim "+c.ClaimUID+" device "+c.Device), Ev("CDI", c.Evidence)}
			switch {
			case c.Resolve == dra.Invalid:
				why = "not a qualified CDI device name"
			case c.Rejected != "":
				why = "the spec that declares it is refused by the CDI library (" + c.Rejected + ")"
				ev = append(ev, Ev("rejected spec", c.Rejected))
			}
			if n.WrittenBeforeBoot {
				why += " (the state was written before this boot: /var/run/cdi is a tmpfs)"
			}
			out.Add("DRA_CLAIM_CDI_UNRESOLVED", report.Fail, c.Claim,
				"claim "+c.Claim+" ("+c.Driver+") was prepared with CDI device "+c.ID+": "+why, ev...)
		case dra.ResolveUnknown:
			// A spec directory could not be read: the device may be
			// declared there. Not looked at is NOT_RUN, never silence.
			out.NotRun("DRA_CLAIM_CDI_NOT_CHECKED", c.Claim,
				"whether claim "+c.Claim+"'s CDI device "+c.ID+" resolves is not known", e.errWhy(c.UnsureWhy, c.UnsureErr, "", ""),
				Ev(n.StatePath, "claim "+c.ClaimUID+" device "+c.Device))
		}
	}
	for _, d := range n.Double {
		out.Add("DRA_DOUBLE_ADVERTISED", report.Warn, d.Key,
			fmt.Sprintf("%s is advertised twice: as %s device %s by a device plugin and as CDI device %s by DRA driver %s", d.Key, d.Resource, d.DeviceID, d.CDIDevice, d.Driver),
			Ev(kubelet.DevicePluginDir(n.KubeletDir)+"/"+kubelet.CheckpointName, d.Resource+": "+d.DeviceID), Ev(d.Spec, d.CDIDevice+" ("+d.DriverBy+")"), Ev("match", d.Evidence))
	}
	if n.DoubleNotRun != "" && len(n.Drivers()) > 0 {
		out.NotRun("DRA_DOUBLE_NOT_CHECKED", "dra", "whether a device plugin and a DRA driver advertise the same devices is not known", e.errWhy(n.DoubleNotRun, n.DoubleErr, "", ""))
	}
	e.judgeDRARuntime(out, n.RuntimeCDI)
}

// judgeDRARuntime judges each CRI runtime against each DRA driver. Which
// runtime the kubelet talks to (its --container-runtime-endpoint) is not
// read, so a runtime that cannot serve the driver is a FAIL only when no
// other CRI runtime on the node can or might: then whichever the kubelet
// uses, the claims' devices do not reach their containers.
func (e *Env) judgeDRARuntime(out *Out, rc *dra.RuntimeCDI) {
	if rc == nil {
		return // no DRA driver on the node
	}
	if rc.NotFound != "" {
		fix := "Find the node's CRI runtime (`crictl info` names it and shows enableCDI) and read its CDI setting by hand (`containerd config dump | grep -i cdi`, `crio config | grep -i cdi`): accel-doctor looks for its binary only in the directories named."
		if !e.Root.IsLive() {
			fix += " On a capture, take it again on the host (`accel-doctor snapshot node.tar.gz`): it keeps what the runtimes' binaries say of their CDI library."
		}
		out.NotRun("DRA_RUNTIME_CDI_NOT_CHECKED", strings.Join(rc.Drivers, ", "),
			"whether the container runtime resolves the CDI devices of DRA driver(s) "+strings.Join(rc.Drivers, ", ")+" is not known", report.Explain(rc.NotFound, fix))
		return
	}
	for _, drv := range rc.Drivers {
		answers, st := serveEach(rc, drv)
		for i, rt := range rc.Runtimes {
			a := answers[i]
			subj := drv + " @ " + rt.Name
			ev := make([]report.Evidence, 0, len(a.Evidence))
			for _, e := range a.Evidence {
				ev = append(ev, Ev(e[0], e[1]))
			}
			switch a.Answer {
			case dra.Serves:
				out.Add("DRA_RUNTIME_CDI_OK", report.Pass, subj, a.Why, ev...)
			case dra.NoCDI:
				out.Add("DRA_RUNTIME_NO_CDI", st, subj, a.Why+": the CDI devices DRA driver "+drv+" prepares reach no container"+otherRuntimes(st), ev...)
			case dra.TooOld:
				out.Add("DRA_RUNTIME_CDI_TOO_OLD", st, subj, a.Why+": the runtime skips that spec and the claims' devices do not resolve"+otherRuntimes(st), ev...)
			default:
				out.NotRun("DRA_RUNTIME_CDI_NOT_CHECKED", subj, "whether "+rt.Name+" resolves the CDI devices of DRA driver "+drv+" is not known", e.servingWhy(a, rt.Name), ev...)
			}
		}
	}
}

// serveEach is every CRI runtime's answer for consumer, and the status
// of an answer that cannot serve it: FAIL when no runtime can (whichever
// the kubelet uses, the devices reach no container), WARN when another
// can or may.
func serveEach(rc *dra.RuntimeCDI, consumer string) ([]dra.Serving, report.Status) {
	answers := make([]dra.Serving, len(rc.Runtimes))
	cannot := 0
	for i, rt := range rc.Runtimes {
		answers[i] = rc.Serve(rt, consumer)
		if a := answers[i].Answer; a == dra.NoCDI || a == dra.TooOld {
			cannot++
		}
	}
	if cannot < len(rc.Runtimes) {
		return answers, report.Warn
	}
	return answers, report.Fail
}

// servingWhy is why a runtime's serving of a driver is not known
// (dra.Unsure): a configuration or spec directory that could not be
// read, or a fact no file on the node gives.
func (e *Env) servingWhy(a dra.Serving, runtimeName string) report.Why {
	switch a.Unsure {
	case dra.UnsureConfig, dra.UnsureSpecs:
		if a.Err != nil {
			return e.errWhy(a.Why, a.Err, "", "")
		}
	case dra.UnsureDefault:
		return report.Explain(a.Why, "Read the runtime's effective configuration by hand (`containerd config dump | grep -i enable_cdi`, `crictl info | grep -i cdi`), or set enable_cdi explicitly in its configuration.")
	case dra.UnsureLibrary, dra.UnsureNewer:
		return report.Explain(a.Why, "Find "+runtimeName+"'s release (`containerd --version`, `crio version`, `dockerd --version`) and the first releases that load the spec's cdiVersion (`accel-doctor explain CDI_VERSION_UNSUPPORTED`).")
	}
	return report.Unusable(a.Why, "")
}

func otherRuntimes(st report.Status) string {
	if st == report.Fail {
		return ""
	}
	return " (if the kubelet uses this runtime: another CRI runtime on the node can or may serve it)"
}

func judgeDRARegistration(out *Out, r *dra.Registration, replayed bool) {
	ev := []report.Evidence{Ev(r.Path, r.Type), Ev(r.Dial.Method, dialText(r.Dial))}
	if r.OlderThanKubelet {
		// No fault by itself (the plugin watcher registers the sockets it
		// finds at start); beside a dead one it dates the driver's death
		// before the running kubelet.
		ev = append(ev, Ev(r.Path+" (mtime)", r.ModTime.UTC().String()+": bound before the running kubelet started"))
	}
	name := r.Name
	if r.Info != nil && r.Info.Name != "" {
		name = r.Info.Name
	}
	switch a := r.Dial.Answer; {
	case a == kubelet.Refused:
		out.Add("DRA_REGISTRATION_DEAD", report.Fail, name, "no driver listens on registration socket "+r.Name+" (connection refused)", ev...)
		return
	case couldNotLook(a):
		out.NotRun("DRA_REGISTRATION_NOT_ANSWERING", name, "registration socket "+r.Name+" could not be tried", dialWhy(r.Dial, replayed), ev...)
		return
	case a == kubelet.NotSocket:
		return // not a socket: the kubelet's plugin watcher skips it too
	case a != kubelet.Answered:
		out.Add("DRA_REGISTRATION_NOT_ANSWERING", report.Fail, name, "registration socket "+r.Name+" does not answer GetInfo ("+string(a)+")", ev...)
		return
	case r.Info == nil:
		// A gRPC server answered with an error status: the kubelet's
		// plugin watcher gets no PluginInfo and cannot register it.
		out.Add("DRA_REGISTRATION_NOT_ANSWERING", report.Fail, name, "registration socket "+r.Name+" answers GetInfo with an error ("+r.Dial.Code+"): "+r.Dial.Err,
			append(ev, Ev(r.Dial.Method, dialText(r.Dial)))...)
		return
	}
	if r.Info.Type != dra.TypeDRA {
		// A CSI or device-plugin registration: not DRA's, unless it
		// names the socket a DRA driver serves.
		if path.Base(r.Info.Endpoint) == dra.ServiceSocketName {
			out.Add("DRA_REGISTRATION_WRONG_TYPE", report.Warn, name,
				"registration socket "+r.Name+" registers "+quoteType(r.Info.Type)+" "+name+" with endpoint "+r.Info.Endpoint+", a DRA driver's service socket: the kubelet's DRA manager does not get it",
				append(ev, Ev(r.Dial.Method, "type "+r.Info.Type+", endpoint "+r.Info.Endpoint))...)
		}
		return
	}
	if r.Unsupported {
		out.Add("DRA_UNSUPPORTED_VERSION", report.Fail, name,
			"driver "+name+" registers versions "+strings.Join(r.Info.SupportedVersions, ", ")+", none of which this kubelet's DRA manager speaks", ev...)
	}
	if r.Endpoint != nil && r.Endpoint.Dial.Answer == kubelet.NoAccess {
		out.NotRun("DRA_ENDPOINT_MISSING", name, "whether driver "+name+"'s endpoint "+r.Endpoint.Path+" accepts a connection is not known",
			dialWhy(r.Endpoint.Dial, replayed), append(ev, Ev(r.Endpoint.Path, dialText(r.Endpoint.Dial)))...)
		return
	}
	if r.Endpoint != nil && r.Endpoint.Dial.Answer != dra.Connected {
		out.Add("DRA_ENDPOINT_MISSING", report.Fail, name,
			"driver "+name+"'s endpoint "+r.Endpoint.Path+" does not accept a connection ("+string(r.Endpoint.Dial.Answer)+")",
			append(ev, Ev(r.Endpoint.Path, dialText(r.Endpoint.Dial)))...)
		return
	}
	// A healthy registration says so: without it a driver the kubelet
	// can use and a node where nothing was looked at read the same.
	if !r.Unsupported && r.Live() {
		out.Add("DRA_REGISTRATION_OK", report.Pass, name,
			"driver "+name+" answers GetInfo on "+r.Name+" ("+strings.Join(r.Info.SupportedVersions, ", ")+") and its endpoint "+r.Endpoint.Path+" accepts a connection",
			append(ev, Ev(r.Endpoint.Path, string(r.Endpoint.Dial.Answer)))...)
	}
}

func quoteType(t string) string { return "type \"" + t + "\"" }

func (e *Env) judgeDRAState(out *Out, n *dra.Node) {
	switch n.StateState {
	case kubelet.Absent:
		return
	case kubelet.NotCaptured:
		why := n.StateErr
		if why == "" {
			why = "the snapshot did not capture " + n.StatePath
		}
		out.NotRun("DRA_STATE_NOT_READ", "dra_manager_state", "the kubelet's DRA state was not captured", e.stateWhy(why, n.StateState, n.StatePath, n.Replayed), Ev(n.StatePath, string(n.StateState)))
		return
	case kubelet.Unreadable, kubelet.Denied:
		// Could not read it (permission, a FIFO, socket or directory
		// where the file should be, a symlink loop, too large): the
		// reader refuses what is not a regular file without opening it,
		// so nothing is known of what the kubelet reads there.
		if n.State == nil && !n.StateMalformed {
			out.NotRun("DRA_STATE_NOT_READ", "dra_manager_state", "the kubelet's DRA state could not be read", e.stateWhy(n.StateErr, n.StateState, n.StatePath, n.Replayed), Ev(n.StatePath, string(n.StateState)))
			return
		}
		if n.State == nil {
			out.Add("DRA_STATE_CHECKSUM", report.Fail, "dra_manager_state", "the kubelet's DRA state does not parse: the kubelet will not start", Ev(n.StatePath, n.StateErr))
			return
		}
	}
	if s := n.State; s != nil && (!s.ChecksumOK || s.DataErr != "") {
		out.Add("DRA_STATE_CHECKSUM", report.Fail, "dra_manager_state", "the kubelet's DRA state does not verify: the kubelet will not start",
			Ev(n.StatePath+" Checksum", fmt.Sprint(s.Stored)), Ev("computed (CRC-32)", fmt.Sprint(s.Computed)), Ev("data", s.DataErr))
	}
	if n.WrittenBeforeBoot {
		out.Add("DRA_STATE_FROM_EARLIER_BOOT", report.Pass, "dra_manager_state", "the kubelet's DRA state was written before this boot",
			Ev(n.StatePath+" (mtime)", n.StateModTime.UTC().String()), Ev(dra.ProcStat+" btime", n.BootTime.UTC().String())).AsContext()
	}
}

// DRARegistrations are the DRA drivers registered with the node's
// kubelet as this run's kube.dra read them (a live registration of a
// supported version: dra.Node.Registered), sorted, for the agent's node
// summary. known is false, with the reason, when they could not be
// judged: kube.dra did not run, the registration directory was not read
// or is not there (the kubelet creates it when it starts: a root that
// does not show it does not show the kubelet), or a registration socket
// could not be dialed (it may be a live driver's). Nothing is read here.
func (e *Env) DRARegistrations() (drivers []string, known bool, why string) {
	v, ran, err := e.memoDone("dra.node")
	if !ran {
		return nil, false, "kube.dra did not run in this check"
	}
	n, _ := v.(*dra.Node)
	switch {
	case err != nil:
		return nil, false, err.Error()
	case n == nil:
		return nil, false, "kube.dra read nothing"
	case n.RegistryState == kubelet.Absent:
		return nil, false, n.RegistryDir + " is absent: the kubelet, which creates it when it starts, is not seen under this root"
	case n.RegistryState != kubelet.Present:
		why := n.RegistryDir + ": " + string(n.RegistryState)
		if n.RegistryErr != "" {
			why += ": " + n.RegistryErr
		}
		return nil, false, why
	}
	seen := map[string]bool{}
	drivers = []string{}
	for _, r := range n.Registrations {
		if r.Dial.Answer.CouldNotLook() {
			return nil, false, "registration socket " + r.Path + " could not be tried (" + dialText(r.Dial) + ")"
		}
		if r.Info != nil && r.Info.Type == dra.TypeDRA && !seen[r.Info.Name] && n.Registered(r.Info.Name) {
			seen[r.Info.Name] = true
			drivers = append(drivers, r.Info.Name)
		}
	}
	slices.Sort(drivers)
	return drivers, true, ""
}

// judgeClaimDrivers: claims in the kubelet's DRA state whose driver is
// not registered, and claims holding no prepared device. A driver that
// is there and down (its directory's sockets dead, its registration
// socket refusing, its endpoint gone: draDriverDown) explains its claims'
// state, and those findings follow from its finding.
func judgeClaimDrivers(out *Out, n *dra.Node) {
	followsDown := func(f *report.Finding, driver string) {
		if code, subject := draDriverDown(n, []string{driver}); code != "" {
			f.Follows(code, subject)
		}
	}
	for _, d := range n.UnregisteredClaimDrivers() {
		f := out.Add("DRA_CLAIM_DRIVER_NOT_REGISTERED", report.Warn, d,
			"prepared claims of driver "+d+" are in the kubelet's state, and the driver is not registered",
			Ev(n.StatePath, "claims of "+d), Ev(n.RegistryDir, "no live registration of "+d))
		followsDown(f, d)
	}
	for _, c := range n.NoDeviceClaims() {
		pods := "no pod"
		if len(c.PodUIDs) > 0 {
			pods = "pod(s) " + strings.Join(c.PodUIDs, ", ")
		}
		f := out.Add("DRA_CLAIM_NO_DEVICE", report.Warn, c.Claim,
			"claim "+c.Claim+" holds no device prepared by "+c.Driver+": its prepare has not succeeded, or the driver answered with no device (the containers get nothing from it)",
			Ev(n.StatePath, "claim "+c.ClaimUID+", driver "+c.Driver+": no device"), Ev("referenced by", pods))
		followsDown(f, c.Driver)
	}
}
