package deploytest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/accel-doctor/accel-doctor/internal/cli"
)

// pluginDir holds the binary under the kubectl plugin's name and
// accel-doctor-kubelet and accel-doctor-kube beside it, as krew installs
// them.
func pluginDir(t *testing.T) string {
	bins := binaries(t, false)
	dir := t.TempDir()
	copyFile(t, filepath.Join(bins, "accel-doctor"), filepath.Join(dir, cli.KubectlPlugin), 0o755)
	copyFile(t, filepath.Join(bins, "accel-doctor-kubelet"), filepath.Join(dir, cli.KubeletBinary), 0o755)
	copyFile(t, filepath.Join(bins, "accel-doctor-kube"), filepath.Join(dir, cli.KubeBinary), 0o755)
	return dir
}

func output(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// Run as kubectl runs a plugin (exec of kubectl-accel_doctor with the
// arguments after `kubectl accel-doctor`), the binary is accel-doctor and
// names itself `kubectl accel-doctor`, in the commands accel-doctor-kube
// answers too; under its own name it is unchanged.
func TestKubectlPlugin(t *testing.T) {
	dir := pluginDir(t)
	plugin := filepath.Join(dir, cli.KubectlPlugin)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--version"}, "kubectl accel-doctor version " + version},
		{[]string{"--help"}, `Use "kubectl accel-doctor [command] --help"`},
		{[]string{"check", "--help"}, "Usage:\n  kubectl accel-doctor check [flags]"},
		// Handed over to accel-doctor-kube, which says the same.
		{[]string{"lint", "--help"}, "Usage:\n  kubectl accel-doctor lint -f"},
	} {
		if out := output(t, exec.Command(plugin, c.args...)); !strings.Contains(out, c.want) {
			t.Errorf("kubectl-accel_doctor %s: no %q in\n%s", strings.Join(c.args, " "), c.want, out)
		}
	}
	if out := output(t, exec.Command(filepath.Join(binaries(t, false), "accel-doctor"), "check", "--help")); !strings.Contains(out, "Usage:\n  accel-doctor check [flags]") {
		t.Errorf("accel-doctor check --help under its own name:\n%s", out)
	}
	// A real check through the plugin: the built-in demo snapshot, whose
	// planted FAILs give exit 1 and a JSON report.
	cmd := exec.Command(plugin, "check", "--snapshot", "demo", "-o", "json")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !bytes.Contains(out, []byte(`"DRIVER_LIBRARY_MISMATCH"`)) {
		t.Errorf("kubectl-accel_doctor check --snapshot demo: %v, want exit 1 with DRIVER_LIBRARY_MISMATCH\n%.500s", err, out)
	}

	// Through kubectl itself, when it is installed: it finds the plugin on
	// PATH and execs it.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl is not installed: the plugin was run as kubectl would run it, not through kubectl")
		return
	}
	env := append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	k := exec.Command(kubectl, "accel-doctor", "--version")
	k.Env = env
	if out := output(t, k); !strings.Contains(out, "kubectl accel-doctor version "+version) {
		t.Errorf("kubectl accel-doctor --version: %q", out)
	}
	k = exec.Command(kubectl, "plugin", "list", "--name-only")
	k.Env = env
	if out, _ := k.CombinedOutput(); !strings.Contains(string(out), cli.KubectlPlugin) {
		t.Errorf("kubectl plugin list does not list %s:\n%s", cli.KubectlPlugin, out)
	}
}

// krewPlugin is krew's plugin manifest, v1alpha2
// (sigs.k8s.io/krew pkg/index types: Plugin, PluginSpec, Platform,
// FileOperation), as far as a manifest states it.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
			Bin string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

func decodeKrew(t *testing.T, b []byte) krewPlugin {
	t.Helper()
	var p krewPlugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		t.Fatalf("krew manifest: %v", err)
	}
	return p
}

// The krew manifest is a v1alpha2 Plugin whose release values are marked
// TEMPLATE; filled with the sha256 of an archive built here as a release
// would build it, it installs (files, bin) a plugin that runs.
func TestKrewManifest(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join(repoRoot, "deploy/krew/accel-doctor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := decodeKrew(t, tmpl)
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion %q kind %q", p.APIVersion, p.Kind)
	}
	// kubectl maps `kubectl accel-doctor` to kubectl-accel_doctor.
	if p.Metadata.Name != "accel-doctor" || "kubectl-"+strings.ReplaceAll(p.Metadata.Name, "-", "_") != cli.KubectlPlugin {
		t.Errorf("plugin name %q does not map to %s", p.Metadata.Name, cli.KubectlPlugin)
	}
	if p.Spec.ShortDescription == "" || p.Spec.Description == "" || !strings.HasPrefix(p.Spec.Homepage, "https://") {
		t.Error("shortDescription, description and an https homepage are required")
	}
	if p.Spec.Version != "TEMPLATE_VERSION" {
		t.Errorf("version %q: the template's is TEMPLATE_VERSION, which a release fills", p.Spec.Version)
	}
	arches := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		if os != "linux" || arch == "" {
			t.Errorf("platform %d: selector %v: linux and an arch", i, pl.Selector.MatchLabels)
		}
		arches[arch] = true
		// Not a real URL or sum in the repository: the markers say what a
		// release must fill.
		if !strings.HasPrefix(pl.URI, "TEMPLATE_URL/") || pl.Sha256 != "TEMPLATE_SHA256_LINUX_"+strings.ToUpper(arch) {
			t.Errorf("platform %s: uri %q sha256 %q: want the TEMPLATE markers", arch, pl.URI, pl.Sha256)
		}
		if pl.Bin != cli.KubectlPlugin {
			t.Errorf("platform %s: bin %q", arch, pl.Bin)
		}
		from := map[string]bool{}
		for _, f := range pl.Files {
			from[f.From] = f.To == "."
		}
		if !from[cli.KubectlPlugin] || !from[cli.KubeletBinary] || !from[cli.KubeBinary] || len(from) != 3 {
			t.Errorf("platform %s: files %+v: want %s, %s and %s, each to .", arch, pl.Files, cli.KubectlPlugin, cli.KubeletBinary, cli.KubeBinary)
		}
	}
	if !arches["amd64"] || !arches["arm64"] {
		t.Errorf("platforms %v: want amd64 and arm64", arches)
	}

	// This machine's platform, as a release fills it.
	dir := pluginDir(t)
	archive := filepath.Join(t.TempDir(), "accel-doctor_test_linux_"+runtime.GOARCH+".tar.gz")
	sum := writeArchive(t, archive, dir, []string{cli.KubectlPlugin, cli.KubeletBinary, cli.KubeBinary})
	filled := strings.NewReplacer(
		"TEMPLATE_URL", "https://example.invalid/releases/v0.0.0-test",
		"TEMPLATE_VERSION", "v0.0.0-test",
		"TEMPLATE_SHA256_LINUX_"+strings.ToUpper(runtime.GOARCH), sum,
	).Replace(string(tmpl))
	fp := decodeKrew(t, []byte(filled))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(fp.Spec.Version) {
		t.Errorf("filled version %q is not semver (krew wants vX.Y.Z)", fp.Spec.Version)
	}
	found := false
	for _, pl := range fp.Spec.Platforms {
		if pl.Selector.MatchLabels["arch"] != runtime.GOARCH {
			continue
		}
		found = true
		if strings.Contains(pl.URI, "TEMPLATE") || pl.Sha256 != sum || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(pl.Sha256) {
			t.Errorf("filled platform: uri %q sha256 %q (archive %s)", pl.URI, pl.Sha256, sum)
		}
		if !strings.HasSuffix(pl.URI, filepath.Base(strings.Replace(archive, "_test_", "_v0.0.0-test_", 1))) {
			t.Errorf("filled uri %q does not name the archive a release makes", pl.URI)
		}
		// Install as krew does: unpack, copy files to ., run bin.
		inst := t.TempDir()
		unpack(t, archive, inst)
		for _, f := range pl.Files {
			if _, err := os.Stat(filepath.Join(inst, f.To, f.From)); err != nil {
				t.Errorf("files: %s is not in the archive: %v", f.From, err)
			}
		}
		out := output(t, exec.Command(filepath.Join(inst, pl.Bin), "lint", "--help"))
		if !strings.Contains(out, "kubectl accel-doctor lint") {
			t.Errorf("installed %s lint --help (through accel-doctor-kube beside it):\n%s", pl.Bin, out)
		}
	}
	if !found {
		t.Errorf("no platform for linux/%s", runtime.GOARCH)
	}
}

// writeArchive writes names from dir into a tar.gz at path and returns its
// sha256, as `sha256sum` prints it.
func writeArchive(t *testing.T, path, dir string, names []string) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func unpack(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if hd.Typeflag != tar.TypeReg || strings.Contains(hd.Name, "/") {
			t.Fatalf("archive entry %q: want plain files at the top", hd.Name)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, hd.Name), b, os.FileMode(hd.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}
