package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readOnly are the reader packages: they read the host and never change
// it. Only internal/sandbox (and the plugins and agent, which say so) may
// write.
var readOnly = []string{"hostfs", "pci", "devnode", "driver", "cgroup", "runtime", "cdi", "iommu", "kubelet", "diagnose", "report"}

// mayWrite are the files of reader packages allowed to write, and where:
// hostfs unpacks a snapshot into a temporary directory of its own (made
// 0700, removed on every exit path) and nowhere else; cmd/accel-doctor's
// strace test holds that at run time.
var mayWrite = map[string]bool{
	"hostfs/unpack.go":    true,
	"hostfs/unpackdir.go": true,
}

// writers lists, per imported package, the functions that change the host:
// write, create, remove, rename, mknod, mount, kill, load or attach. A
// reader package may not call them. Opening files for reading goes through
// hostfs; ebpf.NewProgramFromID only takes a handle on a loaded program.
var writers = map[string][]string{
	"os": {"WriteFile", "Create", "CreateTemp", "Mkdir", "MkdirAll", "MkdirTemp", "Remove", "RemoveAll",
		"Rename", "Symlink", "Link", "Chmod", "Chown", "Lchown", "Chtimes", "Truncate", "OpenFile"},
	"syscall": {"Mknod", "Mkdir", "Rmdir", "Unlink", "Mount", "Unmount", "Kill", "Write", "Creat", "Rename", "Symlink", "Link"},
	"golang.org/x/sys/unix": {"Mknod", "Mknodat", "Mkdir", "Mkdirat", "Rmdir", "Unlink", "Unlinkat", "Mount", "Unmount",
		"Kill", "Tgkill", "Write", "Pwrite", "Creat", "Rename", "Renameat", "Renameat2", "Symlink", "Symlinkat",
		"Link", "Linkat", "Ftruncate", "Truncate", "Fchmod", "Chmod", "Fchown", "Chown"},
	"github.com/cilium/ebpf":      {"NewProgram", "NewProgramWithOptions", "NewMap", "NewMapWithOptions", "NewCollection", "LoadCollection"},
	"github.com/cilium/ebpf/link": {"AttachCgroup", "RawAttachProgram", "AttachRawLink"},
}

func TestReadersDoNotWrite(t *testing.T) {
	for _, pkg := range readOnly {
		files, _ := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if len(files) == 0 {
			t.Errorf("reader package internal/%s has no Go files here", pkg)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || mayWrite[pkg+"/"+filepath.Base(f)] {
				continue
			}
			for _, bad := range writeCalls(t, f) {
				t.Errorf("%s: %s: a reader package must not change the host (only internal/sandbox writes)", f, bad)
			}
		}
	}
}

// writeCalls lists the uses of writers in a file, as "pos: pkg.Name".
func writeCalls(t *testing.T, file string) []string {
	t.Helper()
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	// The local name of each watched import.
	local := map[string]string{}
	for _, im := range af.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if _, ok := writers[p]; !ok {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		local[name] = p
	}
	var out []string
	ast.Inspect(af, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		p, ok := local[id.Name]
		if !ok {
			return true
		}
		for _, w := range writers[p] {
			if sel.Sel.Name == w {
				out = append(out, fset.Position(sel.Pos()).String()+": "+id.Name+"."+w)
			}
		}
		return true
	})
	return out
}

// TestReaderCheckSeesWrites keeps TestReadersDoNotWrite from passing by
// seeing nothing: the sandbox, the writer, must show up.
func TestReaderCheckSeesWrites(t *testing.T) {
	var found []string
	files, _ := filepath.Glob(filepath.Join("..", "sandbox", "*.go"))
	for _, f := range files {
		found = append(found, writeCalls(t, f)...)
	}
	for _, want := range []string{"os.Mkdir", "os.WriteFile", "unix.Rmdir", "ebpf.NewProgram", "link.AttachCgroup"} {
		seen := false
		for _, f := range found {
			seen = seen || strings.HasSuffix(f, ": "+want)
		}
		if !seen {
			t.Errorf("the write check does not see %s in internal/sandbox (found %q)", want, found)
		}
	}
}

// TestOnlyCLIImportsSandbox: the writers (internal/sandbox, and
// internal/enter for container --probe) are reached from commands alone
// (internal/cli and the three binaries' mains in cmd/); no reader, check or renderer can
// start them.
func TestOnlyCLIImportsSandbox(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "*", "*.go"))
	cmd, _ := filepath.Glob(filepath.Join("..", "..", "cmd", "*", "*.go"))
	for _, f := range append(files, cmd...) {
		pkg := filepath.Base(filepath.Dir(f))
		if pkg == "cli" || pkg == "sandbox" || pkg == "enter" || pkg == "accel-doctor" || pkg == "accel-doctor-kubelet" || pkg == "accel-doctor-kube" || strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			for _, writer := range []string{"sandbox", "enter"} {
				if strings.Trim(im.Path.Value, `"`) == module+writer {
					t.Errorf("%s imports internal/%s: only internal/cli and cmd/accel-doctor may", f, writer)
				}
			}
		}
	}
}
