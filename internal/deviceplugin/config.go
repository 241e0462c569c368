package deviceplugin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/accel-doctor/accel-doctor/internal/lazyre"
	"go.yaml.in/yaml/v3"
	cdiparser "tags.cncf.io/container-device-interface/pkg/parser"
)

// Config is what `accel-doctor plugin serve --config FILE` reads: the
// resources to advertise. docs/device-plugin.md documents every field and
// docs/plugin-config.example.yaml is a complete example.
type Config struct {
	// Resources are advertised each on a socket of its own (the kubelet
	// takes one resource per Register call). None (resources: [], the
	// config deploy/plugin ships) is valid: the plugin then advertises
	// nothing, registers nothing and says so in its log (Plugin.Run).
	Resources []ResourceConfig `yaml:"resources"`
	// RescanInterval is the fallback periodic rescan (default 30s). Health
	// is event-driven; the rescan only catches what no event announced
	// (a sysfs change where no kernel uevent arrives: a network namespace
	// owned by a user namespace other than the host's, uevent.go).
	RescanInterval Duration `yaml:"rescanInterval"`
	// CDISpecDir is where CDI-mode resources write their spec (default
	// /var/run/cdi, the directory the CDI library reads last and so
	// prefers; a tmpfs, rewritten at every start).
	CDISpecDir string `yaml:"cdiSpecDir"`
}

// ResourceConfig is one extended resource.
type ResourceConfig struct {
	// Name is the extended resource name, e.g. example.com/gpu.
	Name string `yaml:"name"`
	// Socket is the socket's file name in the kubelet's device-plugins
	// directory; default accel-doctor-<vendor>-<name>.sock.
	Socket   string   `yaml:"socket"`
	Selector Selector `yaml:"selector"`
	// Container is what Allocate gives a container beyond each device's
	// own nodes.
	Container ContainerEdits `yaml:"container"`
	// CDI, when set, answers Allocate with CDI device names
	// (vendor/class=ID) and writes a CDI spec for the devices; otherwise
	// Allocate answers with DeviceSpecs, mounts and env.
	CDI *CDIConfig `yaml:"cdi"`
	// PreStartContainer makes the kubelet call PreStartContainer before
	// each container start; the plugin then re-checks the devices' health
	// and nodes at that moment and refuses a device that is gone.
	PreStartContainer bool `yaml:"preStartContainer"`
}

// Selector picks the devices of a resource: PCI functions, or device
// nodes matched by globs. Exactly one of the two.
type Selector struct {
	PCI *PCISelector `yaml:"pci"`
	// DeviceNodes are globs of host paths (path.Match syntax per
	// component), e.g. /dev/accel/accel*; each matching node is a device.
	DeviceNodes []string `yaml:"deviceNodes"`
}

// PCISelector matches PCI functions. Empty fields match anything; at least
// one of Vendor and Class must be given.
type PCISelector struct {
	Vendor  string   `yaml:"vendor"`  // 4 hex digits, e.g. "10de"
	Devices []string `yaml:"devices"` // 4 hex digits each
	// Class is a prefix of the 6-hex-digit class code: "03" (display),
	// "0302" (3D controller), "120000" (processing accelerator).
	Class string `yaml:"class"`
	// Drivers, when set, are the drivers a device must be bound to to be
	// Healthy. Without them any bound driver counts. A selected function
	// with no (or another) driver is listed Unhealthy, not dropped: an
	// unbind shows in the kubelet as allocatable going down.
	Drivers []string `yaml:"drivers"`
}

// ContainerEdits is what every allocation of the resource gets besides
// each device's own nodes.
type ContainerEdits struct {
	// DeviceNodes are nodes shared by all devices (e.g. /dev/nvidiactl,
	// /dev/vfio/vfio), given once per container.
	DeviceNodes []NodeEdit        `yaml:"deviceNodes"`
	Mounts      []MountEdit       `yaml:"mounts"`
	Env         map[string]string `yaml:"env"`
	// DeviceIDsEnv, when set, names a variable that receives the
	// allocated device IDs, comma-separated.
	DeviceIDsEnv string `yaml:"deviceIDsEnv"`
	// Permissions of the device nodes given (cgroup access: "r", "w",
	// "m" combined; default "rw").
	Permissions string `yaml:"permissions"`
}

// NodeEdit is one device node; ContainerPath defaults to HostPath.
type NodeEdit struct {
	HostPath      string `yaml:"hostPath"`
	ContainerPath string `yaml:"containerPath"`
}

// MountEdit is one bind mount.
type MountEdit struct {
	HostPath      string `yaml:"hostPath"`
	ContainerPath string `yaml:"containerPath"`
	ReadOnly      bool   `yaml:"readOnly"`
}

// CDIConfig names the CDI kind of a resource's devices.
type CDIConfig struct {
	Vendor string `yaml:"vendor"` // e.g. example.com
	Class  string `yaml:"class"`  // e.g. gpu
}

// Kind is vendor/class.
func (c *CDIConfig) Kind() string { return c.Vendor + "/" + c.Class }

// Duration is a time.Duration written as Go writes one ("30s", "1m").
type Duration time.Duration

// UnmarshalYAML reads "30s"-style durations.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// Defaults.
const (
	DefaultRescanInterval = 30 * time.Second
	DefaultCDISpecDir     = "/var/run/cdi"
	maxConfigSize         = 1 << 20
)

// ParseConfig reads and validates a config. Unknown fields are errors (a
// misspelt field silently ignored would change what a container gets).
func ParseConfig(r io.Reader) (*Config, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigSize {
		return nil, fmt.Errorf("config larger than %d bytes", maxConfigSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config is empty")
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

var hex4 = lazyre.New(`^[0-9a-fA-F]{4}$`)
var hexClass = lazyre.New(`^([0-9a-fA-F]{2}){1,3}$`)

// Validate checks a config and fills in its defaults. A config with no
// resources is valid: it selects nothing.
func (c *Config) Validate() error {
	if c.RescanInterval == 0 {
		c.RescanInterval = Duration(DefaultRescanInterval)
	}
	if time.Duration(c.RescanInterval) < 100*time.Millisecond {
		return fmt.Errorf("rescanInterval %s is below 100ms", time.Duration(c.RescanInterval))
	}
	if c.CDISpecDir == "" {
		c.CDISpecDir = DefaultCDISpecDir
	}
	if !path.IsAbs(c.CDISpecDir) {
		return fmt.Errorf("cdiSpecDir %q is not absolute", c.CDISpecDir)
	}
	names, sockets := map[string]bool{}, map[string]bool{}
	for i := range c.Resources {
		r := &c.Resources[i]
		where := fmt.Sprintf("resources[%d] (%s)", i, r.Name)
		if err := ValidateResourceName(r.Name); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if names[r.Name] {
			return fmt.Errorf("%s: resource declared twice", where)
		}
		names[r.Name] = true
		if r.Socket == "" {
			r.Socket = DefaultSocketName(r.Name)
		}
		if strings.ContainsRune(r.Socket, '/') || r.Socket == KubeletSocket || r.Socket == "." || r.Socket == ".." || !strings.HasSuffix(r.Socket, ".sock") {
			return fmt.Errorf("%s: socket %q must be a file name ending in .sock, not kubelet.sock", where, r.Socket)
		}
		if sockets[r.Socket] {
			return fmt.Errorf("%s: socket %q used twice", where, r.Socket)
		}
		sockets[r.Socket] = true
		if err := r.Selector.validate(); err != nil {
			return fmt.Errorf("%s: selector: %w", where, err)
		}
		if err := r.Container.validate(); err != nil {
			return fmt.Errorf("%s: container: %w", where, err)
		}
		if r.CDI != nil {
			if err := cdiparser.ValidateVendorName(r.CDI.Vendor); err != nil || r.CDI.Vendor == "" {
				return fmt.Errorf("%s: cdi.vendor %q: %v", where, r.CDI.Vendor, orEmpty(err))
			}
			if err := cdiparser.ValidateClassName(r.CDI.Class); err != nil || r.CDI.Class == "" {
				return fmt.Errorf("%s: cdi.class %q: %v", where, r.CDI.Class, orEmpty(err))
			}
		}
	}
	return nil
}

func orEmpty(err error) error {
	if err == nil {
		return errors.New("empty")
	}
	return err
}

func (s *Selector) validate() error {
	if (s.PCI == nil) == (len(s.DeviceNodes) == 0) {
		return errors.New("give exactly one of pci and deviceNodes")
	}
	for _, g := range s.DeviceNodes {
		if !path.IsAbs(g) || path.Clean(g) != g {
			return fmt.Errorf("deviceNodes glob %q is not a clean absolute path", g)
		}
		if _, err := path.Match(path.Base(g), ""); err != nil {
			return fmt.Errorf("deviceNodes glob %q: %w", g, err)
		}
	}
	if p := s.PCI; p != nil {
		if p.Vendor == "" && p.Class == "" {
			return errors.New("pci needs vendor or class")
		}
		if p.Vendor != "" && !hex4().MatchString(p.Vendor) {
			return fmt.Errorf("pci.vendor %q is not 4 hex digits", p.Vendor)
		}
		for _, d := range p.Devices {
			if !hex4().MatchString(d) {
				return fmt.Errorf("pci.devices: %q is not 4 hex digits", d)
			}
		}
		if p.Class != "" && !hexClass().MatchString(p.Class) {
			return fmt.Errorf("pci.class %q is not 2, 4 or 6 hex digits", p.Class)
		}
	}
	return nil
}

func (e *ContainerEdits) validate() error {
	for _, n := range e.DeviceNodes {
		if !path.IsAbs(n.HostPath) || (n.ContainerPath != "" && !path.IsAbs(n.ContainerPath)) {
			return fmt.Errorf("deviceNodes: %q -> %q: paths must be absolute", n.HostPath, n.ContainerPath)
		}
	}
	for _, m := range e.Mounts {
		if !path.IsAbs(m.HostPath) || !path.IsAbs(m.ContainerPath) {
			return fmt.Errorf("mounts: %q -> %q: both paths must be given, absolute", m.HostPath, m.ContainerPath)
		}
	}
	for k := range e.Env {
		if msg := envNameProblem(k); msg != "" {
			return fmt.Errorf("env %q: %s", k, msg)
		}
	}
	if e.DeviceIDsEnv != "" {
		if msg := envNameProblem(e.DeviceIDsEnv); msg != "" {
			return fmt.Errorf("deviceIDsEnv %q: %s", e.DeviceIDsEnv, msg)
		}
	}
	if e.Permissions == "" {
		e.Permissions = "rw"
	}
	if strings.Trim(e.Permissions, "rwm") != "" {
		return fmt.Errorf("permissions %q: only r, w and m", e.Permissions)
	}
	return nil
}

// DefaultSocketName is accel-doctor-<domain>_<name>.sock. The kubelet
// keeps no record of which socket serves which resource, so the name
// carries it, reversibly: an extended resource's domain is a DNS
// subdomain, which has no "_", so the first "_" ends it (the name part
// may hold "_" and "."). internal/kubelet reads the resource back from
// this name (and from the mock's, MockSocketName).
func DefaultSocketName(resource string) string {
	return "accel-doctor-" + strings.Replace(resource, "/", "_", 1) + ".sock"
}

// MockSocketName is the mock's socket for its instance i (0 or 1):
// accel-doctor-mock-<domain>_<name>.sock, and @2 before the suffix for
// the second instance of the duplicate mode ("@" is in neither part of a
// resource name).
func MockSocketName(resource string, i int) string {
	s := "accel-doctor-mock-" + strings.Replace(resource, "/", "_", 1)
	if i > 0 {
		s += fmt.Sprintf("@%d", i+1)
	}
	return s + ".sock"
}

// matchPCI reports whether a function's ids match (the driver is judged
// by health, not selection).
func (p *PCISelector) match(vendor, device uint16, class uint32) bool {
	if p.Vendor != "" {
		v, _ := strconv.ParseUint(p.Vendor, 16, 16)
		if uint16(v) != vendor {
			return false
		}
	}
	if len(p.Devices) > 0 {
		ok := false
		for _, d := range p.Devices {
			v, _ := strconv.ParseUint(d, 16, 16)
			ok = ok || uint16(v) == device
		}
		if !ok {
			return false
		}
	}
	if p.Class != "" {
		want := strings.ToLower(p.Class)
		if !strings.HasPrefix(fmt.Sprintf("%06x", class), want) {
			return false
		}
	}
	return true
}
