package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// MaxConfigSize bounds a runtime configuration file.
const MaxConfigSize = 1 << 20

// maxImports bounds the files one configuration may pull in.
const maxImports = 64

// CDIConfig is what a runtime's configuration says about CDI.
type CDIConfig struct {
	// Enabled: nil when not known.
	Enabled *bool `json:"enabled,omitempty"`
	// EnabledFrom: where the answer comes from (a file and key, or the
	// version's default and where that default is written).
	EnabledFrom string `json:"enabled_from,omitempty"`
	// Dirs: the spec directories the runtime reads, when its
	// configuration sets them (nil: the library's defaults).
	Dirs     []string `json:"dirs,omitempty"`
	DirsFrom string   `json:"dirs_from,omitempty"`
	Files    []string `json:"files,omitempty"` // configuration files read
	Errs     []error  `json:"-"`               // unreadable or unparsable ones
}

func boolp(b bool) *bool { return &b }

// readTOML reads a TOML file into a generic document. Absent is
// (nil, nil).
func readTOML(root *hostfs.Root, p string) (map[string]any, error) {
	b, err := root.ReadFileLimit(p, MaxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseTOML(b, p)
}

// parseTOML decodes TOML with go-toml v2, the decoder containerd itself
// uses for config.toml.
func parseTOML(b []byte, name string) (doc map[string]any, err error) {
	doc = map[string]any{}
	if err := toml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return doc, nil
}

// lookup walks a decoded document along keys.
func lookup(doc map[string]any, keys ...string) (any, bool) {
	var cur any = doc
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func stringList(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// containerd's CRI configuration tables: config version 1 ("cri"),
// version 2 (io.containerd.grpc.v1.cri, containerd 1.x and 2.x before
// migration) and version 3 (io.containerd.cri.v1.runtime, containerd
// 2.x): internal/cri/config/config.go EnableCDI `toml:"enable_cdi"`,
// CDISpecDirs `toml:"cdi_spec_dirs"`.
var containerdCRITables = []string{"cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"}

// ContainerdConfigs are where containerd's configuration is looked for:
// the default, and the one k3s and RKE2 generate for their own.
var ContainerdConfigs = []string{"/etc/containerd/config.toml", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml", "/var/lib/rancher/rke2/agent/etc/containerd/config.toml"}

// ContainerdCDIConfig reads enable_cdi and cdi_spec_dirs from
// containerd's configuration and the files it imports, in containerd's
// order (cmd/containerd/server/config/config.go LoadConfig: the file,
// then its imports breadth-first, each merged over what came before).
// version is containerd's own release ("" unknown), for the default:
// CDI is off by default in 1.7 (pkg/cri/config/config_unix.go EnableCDI:
// false) and on in 2.0 and later (internal/cri/config/config_unix.go
// EnableCDI: true, CDISpecDirs /etc/cdi, /var/run/cdi).
func ContainerdCDIConfig(root *hostfs.Root, version string) CDIConfig {
	var c CDIConfig
	cfgVersion := int64(0)
	for _, main := range ContainerdConfigs {
		pending := []string{main}
		loaded := map[string]bool{}
		for len(pending) > 0 && len(loaded) < maxImports {
			p := pending[0]
			pending = pending[1:]
			if loaded[p] {
				continue
			}
			loaded[p] = true
			doc, err := readTOML(root, p)
			if err != nil {
				c.Errs = append(c.Errs, err)
				continue
			}
			if doc == nil {
				continue
			}
			c.Files = append(c.Files, p)
			if v, ok := doc["version"].(int64); ok {
				cfgVersion = v
			}
			for _, t := range containerdCRITables {
				if v, ok := lookup(doc, "plugins", t, "enable_cdi"); ok {
					if b, ok := v.(bool); ok {
						c.Enabled, c.EnabledFrom = boolp(b), fmt.Sprintf("enable_cdi = %t in %s [plugins.%q]", b, p, t)
					}
				}
				if v, ok := lookup(doc, "plugins", t, "cdi_spec_dirs"); ok {
					if ds, ok := stringList(v); ok {
						c.Dirs, c.DirsFrom = ds, fmt.Sprintf("cdi_spec_dirs in %s [plugins.%q]", p, t)
					}
				}
			}
			if v, ok := doc["imports"]; ok {
				imps, _ := stringList(v)
				for _, imp := range imps {
					if !strings.HasPrefix(imp, "/") {
						imp = path.Join(path.Dir(p), imp)
					}
					matches, err := root.Glob(imp)
					if err != nil {
						c.Errs = append(c.Errs, fmt.Errorf("%s: imports %q: %w", p, imp, err))
						continue
					}
					pending = append(pending, matches...)
				}
			}
		}
		if len(c.Files) > 0 {
			break // the first configuration found is the one in use
		}
	}
	if c.Enabled == nil {
		maj, _, _, ok := semver(version)
		switch {
		case ok && maj >= 2, !ok && cfgVersion == 3:
			c.Enabled, c.EnabledFrom = boolp(true), "containerd 2.x default (enable_cdi = true: internal/cri/config/config_unix.go); not set in its configuration"
			if !ok {
				c.EnabledFrom += " (config version 3 is containerd 2.x's)"
			}
		case ok && maj == 1:
			c.Enabled, c.EnabledFrom = boolp(false), "containerd 1.x default (enable_cdi = false: pkg/cri/config/config_unix.go); not set in its configuration"
		}
	}
	return c
}

// CRIOConfigs are CRI-O's configuration file and drop-in directory
// (crio.conf(5): the drop-ins, in lexical order, override the file).
const (
	CRIOConfig    = "/etc/crio/crio.conf"
	CRIOConfigDir = "/etc/crio/crio.conf.d"
)

// CRIOCDIConfig reads [crio.runtime] cdi_spec_dirs. CRI-O has no switch
// for CDI: from 1.24 it configures the CDI cache at start
// (pkg/config/config.go: cdi.Configure(cdi.WithSpecDirs(CDISpecDirs...)))
// with the library's default directories unless told otherwise; the
// --cdi-spec-dirs flag and CONTAINER_CDI_SPEC_DIRS override the files,
// and neither can be seen from here.
func CRIOCDIConfig(root *hostfs.Root, version string) CDIConfig {
	var c CDIConfig
	files := []string{CRIOConfig}
	if names, err := root.ReadDir(CRIOConfigDir); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n, ".conf") {
				files = append(files, path.Join(CRIOConfigDir, n))
			}
		}
	}
	for _, p := range files {
		doc, err := readTOML(root, p)
		if err != nil {
			c.Errs = append(c.Errs, err)
			continue
		}
		if doc == nil {
			continue
		}
		c.Files = append(c.Files, p)
		if v, ok := lookup(doc, "crio", "runtime", "cdi_spec_dirs"); ok {
			if ds, ok := stringList(v); ok {
				c.Dirs, c.DirsFrom = ds, "[crio.runtime] cdi_spec_dirs in "+p
			}
		}
	}
	if _, _, _, ok := semver(version); ok && cmpVersion(version, "1.24.0") < 0 {
		c.Enabled, c.EnabledFrom = boolp(false), "CRI-O before 1.24.0 has no CDI support"
	} else {
		c.Enabled, c.EnabledFrom = boolp(true), "CRI-O has no switch for CDI: always on from 1.24.0 (pkg/config/config.go)"
	}
	return c
}

// DockerDaemonJSON is dockerd's configuration.
const DockerDaemonJSON = "/etc/docker/daemon.json"

// DockerCDIConfig reads "features": {"cdi": ...} and "cdi-spec-dirs".
// CDI is on by default from Docker Engine 28.2.0 unless "features"
// turns it off (cmd/dockerd/daemon.go cdiEnabled); from 25.0.0 to
// 28.1.x only "features": {"cdi": true} turns it on.
func DockerCDIConfig(root *hostfs.Root, version string) CDIConfig {
	var c CDIConfig
	var doc struct {
		Features map[string]bool `json:"features"`
		Dirs     []string        `json:"cdi-spec-dirs"`
	}
	b, err := root.ReadFileLimit(DockerDaemonJSON, MaxConfigSize)
	switch {
	case err == nil:
		c.Files = append(c.Files, DockerDaemonJSON)
		if err := json.Unmarshal(b, &doc); err != nil {
			c.Errs = append(c.Errs, fmt.Errorf("%s: %w", DockerDaemonJSON, err))
		}
	case !errors.Is(err, fs.ErrNotExist):
		c.Errs = append(c.Errs, err)
	}
	if len(doc.Dirs) > 0 {
		c.Dirs, c.DirsFrom = doc.Dirs, "cdi-spec-dirs in "+DockerDaemonJSON
	}
	if v, ok := doc.Features["cdi"]; ok {
		c.Enabled, c.EnabledFrom = boolp(v), fmt.Sprintf(`"features": {"cdi": %t} in %s`, v, DockerDaemonJSON)
	}
	if c.Enabled != nil || len(c.Errs) > 0 {
		return c
	}
	if _, _, _, ok := semver(version); ok {
		switch {
		case cmpVersion(version, "25.0.0") < 0:
			c.Enabled, c.EnabledFrom = boolp(false), "Docker Engine before 25.0.0 has no CDI support"
		case cmpVersion(version, "28.2.0") < 0:
			c.Enabled, c.EnabledFrom = boolp(false), `Docker Engine 25.0-28.1 default: off unless "features": {"cdi": true}`
		default:
			c.Enabled, c.EnabledFrom = boolp(true), `Docker Engine 28.2.0 and later default: on unless "features": {"cdi": false} (cmd/dockerd/daemon.go cdiEnabled)`
		}
	}
	return c
}

// ContainersConfs are containers.conf(5)'s files, lowest priority
// first; podman reads [engine] cdi_spec_dirs from them.
var ContainersConfs = []string{"/usr/share/containers/containers.conf", "/etc/containers/containers.conf"}

// ContainersConfDir holds containers.conf drop-ins.
const ContainersConfDir = "/etc/containers/containers.conf.d"

// PodmanCDIConfig reads [engine] cdi_spec_dirs. Podman resolves CDI
// names given to --device whenever they are qualified; there is no
// switch.
func PodmanCDIConfig(root *hostfs.Root) CDIConfig {
	var c CDIConfig
	files := append([]string(nil), ContainersConfs...)
	if names, err := root.ReadDir(ContainersConfDir); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n, ".conf") {
				files = append(files, path.Join(ContainersConfDir, n))
			}
		}
	}
	for _, p := range files {
		doc, err := readTOML(root, p)
		if err != nil {
			c.Errs = append(c.Errs, err)
			continue
		}
		if doc == nil {
			continue
		}
		c.Files = append(c.Files, p)
		if v, ok := lookup(doc, "engine", "cdi_spec_dirs"); ok {
			if ds, ok := stringList(v); ok {
				c.Dirs, c.DirsFrom = ds, "[engine] cdi_spec_dirs in "+p
			}
		}
	}
	c.Enabled, c.EnabledFrom = boolp(true), "podman resolves qualified --device names with CDI; it has no switch"
	return c
}
