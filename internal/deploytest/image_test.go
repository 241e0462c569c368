package deploytest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildah runs buildah with its own storage under dir (vfs: no overlay
// mount, no fuse), so that the test never reads or writes the host's image
// store.
type buildah struct {
	t   *testing.T
	bin string
	dir string
}

func (b buildah) run(args ...string) string {
	b.t.Helper()
	full := append([]string{"--root", filepath.Join(b.dir, "root"), "--runroot", filepath.Join(b.dir, "run"), "--storage-driver", "vfs"}, args...)
	cmd := exec.Command(b.bin, full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.t.Fatalf("buildah %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// The Dockerfile builds, with Debian's buildah and no registry (FROM
// scratch pulls nothing), into an image whose config is what the
// Dockerfile says, and whose rootfs runs both binaries side by side.
func TestImageBuildah(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: buildah with vfs storage and chroot isolation needs root here (CI runs as root)")
	}
	bin, err := exec.LookPath("buildah")
	if err != nil {
		t.Skip("buildah is not installed (apt-get install buildah; .ci/run installs it)")
	}
	bins := binaries(t, true)
	ctx := t.TempDir()
	for _, n := range []string{"accel-doctor", "accel-doctor-kubelet", "accel-doctor-kube"} {
		copyFile(t, filepath.Join(bins, n), filepath.Join(ctx, n), 0o755)
	}
	b := buildah{t: t, bin: bin, dir: t.TempDir()}
	const tag = "localhost/accel-doctor:deploytest"
	b.run("build", "--isolation", "chroot", "--build-arg", "VERSION="+version,
		"-f", filepath.Join(repoRoot, "Dockerfile"), "-t", tag, ctx)

	var img struct {
		OCIv1 struct {
			Config struct {
				User       string
				Env        []string
				Entrypoint []string
				Cmd        []string
				Labels     map[string]string
			} `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(b.run("inspect", "--type", "image", tag)), &img); err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	c := img.OCIv1.Config
	if !slices.Equal(c.Entrypoint, []string{"/usr/bin/accel-doctor"}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if c.User != "0:0" {
		t.Errorf("user %q, want 0:0 (the Dockerfile says why)", c.User)
	}
	if !slices.Contains(c.Env, "PATH=/usr/bin") {
		t.Errorf("env %q lacks PATH=/usr/bin", c.Env)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.title":   "accel-doctor",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/accel-doctor/accel-doctor",
	} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}

	ctr := strings.TrimSpace(b.run("from", tag))
	defer b.run("rm", ctr)
	mnt := strings.TrimSpace(b.run("mount", ctr))
	// The rootfs holds the two binaries and nothing else.
	var files []string
	filepath.WalkDir(mnt, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(mnt, p)
			files = append(files, rel)
		}
		return nil
	})
	slices.Sort(files)
	if want := []string{"usr/bin/accel-doctor", "usr/bin/accel-doctor-kube", "usr/bin/accel-doctor-kubelet"}; !slices.Equal(files, want) {
		t.Errorf("image files %q, want %q", files, want)
	}
	// From the mounted rootfs: the binary is the one built here.
	out, err := exec.Command(filepath.Join(mnt, "usr/bin/accel-doctor"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), version) {
		t.Errorf("%s/usr/bin/accel-doctor --version: %v: %s", mnt, err, out)
	}
	// Inside the image (chroot: the image's / and PATH): accel-doctor runs,
	// and hands lint to accel-doctor-kube beside it. lint's help is
	// accel-doctor-kube's: accel-doctor's stand-in has none of its text.
	if out := b.run("run", "--isolation", "chroot", ctr, "--", "accel-doctor", "--version"); !strings.Contains(out, version) {
		t.Errorf("accel-doctor --version in the image: %q", out)
	}
	if out := b.run("run", "--isolation", "chroot", ctr, "--", "accel-doctor", "lint", "--help"); !strings.Contains(out, "lint reads Kubernetes manifests") {
		t.Errorf("accel-doctor lint --help in the image did not reach accel-doctor-kube: %q", out)
	}
	// And plugin to accel-doctor-kubelet: serve's help is its own.
	if out := b.run("run", "--isolation", "chroot", ctr, "--", "accel-doctor", "plugin", "serve", "--help"); !strings.Contains(out, "serve is a Kubernetes device plugin") {
		t.Logf("accel-doctor-kubelet plugin serve --help run directly in the image: %q", b.run("run", "--isolation", "chroot", ctr, "--", "accel-doctor-kubelet", "plugin", "serve", "--help"))
		t.Errorf("accel-doctor plugin serve --help in the image did not reach accel-doctor-kubelet: %q", out)
	}
}
