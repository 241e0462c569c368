package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// productModule is the module whose binary the e2e tests drive.
const productModule = "github.com/accel-doctor/accel-doctor"

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// AccelDoctor is the path of the accel-doctor binary built from the
// repository that holds this module, as the README builds it (static,
// CGO_ENABLED=0, -trimpath). It is built once per test binary, into a
// directory removed when the process exits normally; between runs the go
// build cache keeps the compiled packages and the linked binary, so a
// build with nothing changed takes about a second.
func AccelDoctor(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { builtBin, buildErr = buildAccelDoctor() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func buildAccelDoctor() (string, error) {
	root, err := productRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "accel-doctor-e2e-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "accel-doctor")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/accel-doctor")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/accel-doctor in %s: %v\n%s", root, err, out)
	}
	return bin, nil
}

// productRoot finds the product module's directory: the nearest directory
// above the working directory whose go.mod declares productModule.
func productRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == productModule {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no directory above %s holds the go.mod of %s", wd, productModule)
		}
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// removeBuilt removes what AccelDoctor built; Main calls it after the tests.
func removeBuilt() {
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
}
