package deviceplugin

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
	"github.com/accel-doctor/accel-doctor/internal/pci"
)

// Monitor keeps the devices of every resource and their health. It is
// event-driven: fsnotify watches on the device-node directories and the
// devices' sysfs directories, and the kernel's uevents (live host only),
// each make it re-evaluate at once; a periodic rescan is the fallback.
//
// inotify sees /dev (devtmpfs creates and removes nodes through the VFS,
// drivers/base/devtmpfs.c, which raises the events) and any fixture
// tree; sysfs is kernfs, which raises inotify events only for
// kernfs_notify'd attributes, so on a live host sysfs changes (a device
// removed, a driver unbound) arrive as uevents instead.
type Monitor struct {
	root *hostfs.Root
	res  []*ResourceConfig
	log  *slog.Logger

	mu      sync.Mutex
	devs    []map[string]*Device // per resource: every device ever listed
	sigs    []string             // per resource: what was last published
	onEvent func(res int, devs []*Device)

	kick    chan struct{}
	fullMu  sync.Mutex
	full    bool
	watcher *fsnotify.Watcher
	watched map[string]bool
	rescan  time.Duration
}

// NewMonitor discovers the devices of each resource now. onChange is
// called (from the monitor's goroutine, and once per resource from
// NewMonitor itself) with a copy of a resource's devices whenever their
// IDs, health or topology change.
func NewMonitor(root *hostfs.Root, cfg *Config, log *slog.Logger, onChange func(res int, devs []*Device)) (*Monitor, error) {
	m := &Monitor{root: root, log: log, onEvent: onChange, kick: make(chan struct{}, 1),
		watched: map[string]bool{}, rescan: time.Duration(cfg.RescanInterval)}
	for i := range cfg.Resources {
		m.res = append(m.res, &cfg.Resources[i])
		m.devs = append(m.devs, map[string]*Device{})
		m.sigs = append(m.sigs, "\x00never")
	}
	if m.rescan == 0 {
		m.rescan = DefaultRescanInterval
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("fsnotify: %w", err)
	}
	m.watcher = w
	m.refresh(true)
	return m, nil
}

// Devices returns a copy of a resource's devices, sorted by ID.
func (m *Monitor) Devices(res int) []*Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.copyOf(res)
}

func (m *Monitor) copyOf(res int) []*Device {
	out := make([]*Device, 0, len(m.devs[res]))
	for _, d := range m.devs[res] {
		c := *d
		c.Nodes, c.Shared = slices.Clone(d.Nodes), slices.Clone(d.Shared)
		out = append(out, &c)
	}
	sortDevices(out)
	return out
}

// Kick asks for a re-evaluation (full: rediscover too).
func (m *Monitor) Kick(full bool) {
	if full {
		m.fullMu.Lock()
		m.full = true
		m.fullMu.Unlock()
	}
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Refresh re-evaluates now and returns when done (PreStartContainer uses
// it to judge a device at the moment a container starts).
func (m *Monitor) Refresh() { m.refresh(false) }

// Run watches until ctx ends. uevents: listen to the kernel's uevents
// (the live host; a fixture root has none of its own).
func (m *Monitor) Run(ctx context.Context, uevents bool) {
	defer m.watcher.Close()
	if uevents {
		if s, err := openUevents(); err != nil {
			m.log.Warn("kernel uevents unavailable: relying on fsnotify and the periodic rescan", "err", err)
		} else {
			go func() {
				if err := s.run(ctx, m.uevent); err != nil {
					m.log.Warn("kernel uevent listener stopped", "err", err)
				}
			}()
		}
	}
	t := time.NewTicker(m.rescan)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-m.watcher.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				// A watched directory that goes loses its watch; the
				// next refresh adds it again if it comes back.
				m.mu.Lock()
				delete(m.watched, ev.Name)
				m.mu.Unlock()
			}
			m.Kick(strings.Contains(ev.Name, "/sys/bus/pci/devices"))
		case err, ok := <-m.watcher.Errors:
			if !ok {
				return
			}
			// An inotify queue overflow means events were lost.
			m.log.Warn("fsnotify", "err", err)
			m.Kick(true)
		case <-m.kick:
			m.refreshKicked()
		case <-t.C:
			m.refresh(true)
		}
	}
}

func (m *Monitor) refreshKicked() {
	m.fullMu.Lock()
	full := m.full
	m.full = false
	m.fullMu.Unlock()
	m.refresh(full)
}

// drain handles a pending kick, if any, and says whether there was one
// (tests that drive the monitor without Run).
func (m *Monitor) drain() bool {
	select {
	case <-m.kick:
		m.refreshKicked()
		return true
	default:
		return false
	}
}

// uevent judges whether a kernel event can concern a device of ours.
func (m *Monitor) uevent(u *Uevent) {
	if u == nil { // events were lost
		m.Kick(true)
		return
	}
	if u.Subsystem == "pci" {
		m.Kick(u.Action == "add" || u.Action == "remove")
		return
	}
	if u.DevName != "" && (u.Action == "add" || u.Action == "remove") {
		m.Kick(false)
		return
	}
	m.mu.Lock()
	hit := false
	for _, ds := range m.devs {
		for _, d := range ds {
			if d.Sysfs != "" && strings.HasPrefix("/sys"+u.DevPath+"/", d.Sysfs+"/") || strings.HasPrefix(d.Sysfs+"/", "/sys"+u.DevPath+"/") {
				hit = true
			}
		}
	}
	m.mu.Unlock()
	if hit {
		m.Kick(false)
	}
}

// HandleUevent feeds one raw uevent message, as the kernel sends it, to
// the monitor: what the netlink listener does with each message. Tests
// replay recorded uevents through it.
func (m *Monitor) HandleUevent(raw []byte) error {
	u, err := ParseUevent(raw)
	if err != nil {
		return err
	}
	m.uevent(&u)
	return nil
}

// refresh re-evaluates every device (rediscovering first when full) and
// tells onEvent about the resources that changed.
func (m *Monitor) refresh(full bool) { m.refreshWatched(full, 3) }

// refreshWatched is refresh; when it adds a watch (a directory that came
// back, /dev/accel after a driver reload), it looks again, up to again
// times: an entry made between its discovery and the new watch raised no
// event, and would wait for the periodic rescan.
func (m *Monitor) refreshWatched(full bool, again int) {
	m.mu.Lock()
	var changed []int
	for i, rc := range m.res {
		if full || rc.Selector.PCI == nil {
			found, err := discover(m.root, rc)
			if err != nil {
				m.log.Warn("discovery", "resource", rc.Name, "err", err)
			}
			for _, d := range found {
				if old, ok := m.devs[i][d.ID]; ok {
					// Keep what discovery learnt afresh (a node's place).
					old.Sysfs, old.NUMA, old.HostBridge, old.Bridges = pick(d.Sysfs, old.Sysfs), d.NUMA, pick(d.HostBridge, old.HostBridge), d.Bridges
					if rc.Selector.PCI == nil {
						old.Nodes = d.Nodes
					}
					continue
				}
				m.devs[i][d.ID] = d
				m.log.Info("device found", "resource", rc.Name, "device", d.ID, "numa", d.NUMA)
			}
		}
		list := make([]*Device, 0, len(m.devs[i]))
		for _, d := range m.devs[i] {
			list = append(list, d)
		}
		sortDevices(list)
		before := map[string]string{}
		for _, d := range list {
			before[d.ID] = d.Health
		}
		evaluate(m.root, rc, list)
		for _, d := range list {
			// A device new to the list has no health before ("");
			// one that is Unhealthy from the start is logged too.
			switch b := before[d.ID]; {
			case b == d.Health:
			case d.Health == pluginapi.Healthy:
				if b != "" {
					m.log.Info("device healthy again", "resource", rc.Name, "device", d.ID)
				}
			default:
				m.log.Warn("device unhealthy", "resource", rc.Name, "device", d.ID, "reason", d.Reason)
			}
		}
		if s := signature(list); s != m.sigs[i] {
			m.sigs[i] = s
			changed = append(changed, i)
		}
	}
	added := m.watch()
	copies := make(map[int][]*Device, len(changed))
	for _, i := range changed {
		copies[i] = m.copyOf(i)
	}
	m.mu.Unlock()
	if m.onEvent != nil {
		for _, i := range changed {
			m.onEvent(i, copies[i])
		}
	}
	if added && again > 0 {
		m.refreshWatched(full, again-1)
	}
}

func pick(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// signature is what ListAndWatch and the CDI spec depend on.
func signature(list []*Device) string {
	var b strings.Builder
	for _, d := range list {
		fmt.Fprintf(&b, "%s|%s|%d|", d.ID, d.Health, d.NUMA)
		for _, n := range append(slices.Clone(d.Nodes), d.Shared...) {
			fmt.Fprintf(&b, "%s=%s,", n.Path, n.dev())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// watch adds fsnotify watches on every directory whose entries say
// something about a device: /dev, the directories of the devices' nodes
// and of the node globs (or their nearest existing parent), the PCI
// devices directory and each device's sysfs directory. Called with mu
// held; watches that exist already are kept. It reports whether it added
// one.
func (m *Monitor) watch() (added bool) {
	dirs := map[string]bool{"/dev": true}
	for i, rc := range m.res {
		for _, g := range rc.Selector.DeviceNodes {
			dirs[nonGlobDir(g)] = true
		}
		if rc.Selector.PCI != nil {
			dirs[pci.DevicesDir] = true
		}
		for _, n := range rc.Container.DeviceNodes {
			dirs[path.Dir(n.HostPath)] = true
		}
		for _, d := range m.devs[i] {
			for _, n := range append(slices.Clone(d.Nodes), d.Shared...) {
				dirs[path.Dir(n.Path)] = true
			}
			if d.Sysfs != "" {
				dirs[d.Sysfs] = true
			}
		}
	}
	for d := range dirs {
		// Walk up to a directory that exists: a watch on /dev sees
		// /dev/accel appear, and the next refresh watches it.
		for d != "/" && !m.root.Exists(d) {
			d = path.Dir(d)
		}
		real := m.real(d)
		if m.watched[real] {
			continue
		}
		if err := m.watcher.Add(real); err == nil {
			m.watched[real] = true
			added = true
		}
	}
	return added
}

// real is where a host path is on this machine's filesystem.
func (m *Monitor) real(p string) string {
	if m.root.IsLive() {
		return p
	}
	return path.Join(m.root.Dir(), p)
}

// nonGlobDir is the directory part of a glob before its first wildcard.
func nonGlobDir(g string) string {
	d := path.Dir(g)
	for hasMeta(d) {
		d = path.Dir(d)
	}
	return d
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }
