package hostfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

type recKind uint8

const (
	recFile recKind = 1 << iota
	recDir
	recLink
	recChain
	recMissing
)

// MetaPath holds a snapshot's description inside the archive.
const MetaPath = "/.accel-doctor/snapshot.json"

// SnapshotMeta describes a snapshot.
type SnapshotMeta struct {
	Format int `json:"format"`
	// Tree says the archive holds a whole directory tree (WriteTreeArchive:
	// the built-in demo), not the recording of what readers asked about:
	// Covers judges it like a directory tree.
	Tree    bool      `json:"tree,omitempty"`
	Created time.Time `json:"created,omitzero"` // zero in a tree archive, which must be reproducible
	Tool    string    `json:"tool"`
	Source  string    `json:"source"` // the root directory captured
	Files   int       `json:"files"`
	Nodes   int       `json:"nodes"`
	// SelfPID is the process that took the snapshot: what a replay's
	// /proc/self is. PID is the process asked for with --pid (0: none).
	SelfPID int `json:"self_pid,omitempty"`
	PID     int `json:"pid,omitempty"`
}

// Recorder notes every host path a Root is asked about, so that a snapshot
// holds exactly what the readers used.
type Recorder struct {
	// PID is the process the run judged (--pid), for SnapshotMeta.PID.
	PID int

	mu        sync.Mutex
	paths     map[string]recKind
	nodes     map[string]Node
	synthetic map[string][]byte // CapturedDir-relative name -> content
	redact    map[string]func([]byte) []byte
}

// Record makes r note every path it reads from now on and returns the
// recorder. Snapshot captures use it; nothing else should.
func (r *Root) Record() *Recorder {
	rec := &Recorder{paths: map[string]recKind{}, nodes: map[string]Node{}, synthetic: map[string][]byte{},
		redact: map[string]func([]byte) []byte{}}
	r.mu.Lock()
	r.rec = rec
	r.mu.Unlock()
	return rec
}

func (r *Root) recorder() *Recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rec
}

func (r *Root) record(p string, k recKind) {
	rec := r.recorder()
	if rec == nil {
		return
	}
	p = path.Clean(p)
	rec.mu.Lock()
	rec.paths[p] |= k
	rec.mu.Unlock()
}

func (r *Root) recordChain(p string) { r.record(p, recChain) }

func (r *Root) recordNode(n Node) {
	rec := r.recorder()
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.nodes[n.Path] = n
	rec.mu.Unlock()
}

// secret reports host paths a snapshot never holds, whatever a reader
// touched: process environments (tokens), credentials and keys.
func secret(p string) bool {
	base := path.Base(p)
	switch {
	case strings.HasPrefix(p, "/proc/") && (base == "environ" || base == "cmdline" || base == "mem" || base == "auxv"):
		return true
	case strings.HasPrefix(p, "/etc/shadow"), strings.HasPrefix(p, "/etc/gshadow"),
		strings.HasPrefix(p, "/root/"), strings.HasPrefix(p, "/home/"),
		strings.HasPrefix(p, "/var/lib/kubelet/pki"), strings.HasPrefix(p, "/etc/kubernetes/pki"):
		return true
	case strings.HasSuffix(base, ".key"), strings.HasSuffix(base, ".pem"), base == "kubeconfig":
		return true
	}
	return false
}

// archive is what a snapshot will hold, keyed by host path.
type archive struct {
	root    *Root
	redact  map[string]func([]byte) []byte
	entries map[string]*tar.Header
	data    map[string][]byte
	man     *Manifest
	listed  map[string]bool // directories listed whole (host paths as asked)
}

func (a *archive) addDir(p string) {
	if p == "/" {
		return
	}
	a.addDir(path.Dir(p))
	if _, ok := a.entries[p]; !ok {
		a.entries[p] = &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(p, "/") + "/", Mode: 0o755}
	}
}

// walk captures every directory and symlink on the way to p, following the
// links inside the root the way Root.Resolve does, and returns the host path
// p finally names.
func (a *archive) walk(p string) string {
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	hops := 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, part)
		st, t, err := a.root.lstatRaw(next)
		if err != nil {
			return path.Join(append([]string{next}, parts...)...)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				a.addDir(next)
			}
			cur = next
			continue
		}
		if t == "" || hops > 40 {
			return next
		}
		hops++
		a.addDir(cur)
		a.entries[next] = &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(next, "/"), Linkname: t, Mode: 0o777}
		if strings.HasPrefix(t, "/") {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(t, "/"), "/"), parts...)
	}
	return cur
}

// addCoverage writes CoveragePath: the paths asked about that the host did
// not have, and the directories listed whole, so that a replay can tell
// "absent on the host" from "not captured".
func (a *archive) addCoverage(paths []string) {
	var absent, listed []string
	for _, p := range paths {
		if secret(p) {
			continue
		}
		if a.listed[p] {
			listed = append(listed, p)
		}
		// Absent only where the source itself could have shown it: a
		// snapshot of a tree that lacks /dev does not say the host lacks
		// /dev/nvidia0 (the replay says "not captured", as the tree does).
		if _, err := a.root.Lstat(p); err != nil && errors.Is(err, fs.ErrNotExist) && a.root.Covers(p) {
			absent = append(absent, p)
		}
	}
	a.addData(CoveragePath, formatCoverage(absent, listed))
}

func (a *archive) addFile(p string) {
	final := a.walk(p)
	if secret(final) {
		return
	}
	b, err := a.root.readFile(final, max(a.root.limit, 16<<20))
	if err != nil {
		return
	}
	if f := a.redact[path.Clean(p)]; f != nil {
		if b = f(b); b == nil {
			return // nothing that may travel
		}
	}
	a.addDir(path.Dir(final))
	a.entries[final] = &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(final, "/"), Mode: 0o444, Size: int64(len(b))}
	a.data[final] = b
}

func (a *archive) addListing(p string) {
	final := a.walk(p)
	names, err := a.root.readDir(final)
	if err != nil {
		return
	}
	a.listed[path.Clean(p)] = true
	a.addDir(final)
	for _, name := range names {
		child := path.Join(final, name)
		if _, ok := a.entries[child]; ok {
			continue
		}
		st, t, err := a.root.lstatRaw(child)
		if err != nil {
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if t != "" {
				a.entries[child] = &tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(child, "/"), Linkname: t, Mode: 0o777}
			}
		case unix.S_IFDIR:
			a.addDir(child)
		case unix.S_IFREG:
			// A placeholder so the listing replays; readers that read the
			// file recorded it and get its content instead.
			if _, ok := a.data[child]; !ok && !secret(child) {
				a.entries[child] = &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(child, "/"), Mode: 0o444}
			}
		case unix.S_IFCHR, unix.S_IFBLK:
			a.man.Add(nodeFromStat(child, &st))
		}
	}
}

// WriteSnapshot writes a gzip'd tar of every path the recorder saw, with a
// device manifest for the nodes that were stat'ed and a SnapshotMeta. It
// reads the host again (read-only); the recorder stops recording.
func (r *Root) WriteSnapshot(rec *Recorder, w io.Writer, tool string) (SnapshotMeta, error) {
	r.mu.Lock()
	if r.rec == rec {
		r.rec = nil
	}
	r.mu.Unlock()
	a := &archive{root: r, entries: map[string]*tar.Header{}, data: map[string][]byte{}, man: NewManifest(), listed: map[string]bool{}}
	rec.mu.Lock()
	paths := make([]string, 0, len(rec.paths))
	for p := range rec.paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	kinds, nodes, synthetic := rec.paths, rec.nodes, rec.synthetic
	a.redact = rec.redact
	rec.mu.Unlock()

	a.addRecorded(paths, kinds)
	a.addNodes(nodes, kinds)
	// What readers captured from the kernel rather than from files.
	for name, b := range synthetic {
		a.addData(path.Join(CapturedDir, name), b)
	}
	a.addCoverage(paths)
	meta := SnapshotMeta{Format: SnapshotFormat, PID: rec.PID, Created: time.Now().UTC().Truncate(time.Second), Tool: tool, Source: r.dir, Nodes: a.man.Len()}
	if r.IsLive() || r.liveTree("/proc") {
		// /proc/self is then the process taking the snapshot; in a tree it
		// is whatever the tree holds.
		meta.SelfPID = os.Getpid()
	}
	a.addData(ManifestPath, a.man.Format())
	for _, h := range a.entries {
		if h.Typeflag == tar.TypeReg {
			meta.Files++
		}
	}
	mb, _ := json.MarshalIndent(meta, "", "  ")
	a.addData(MetaPath, mb)
	return meta, a.write(w, meta.Created)
}

// addRecorded adds what the readers asked about: listings first, so that
// files they read replace the listings' placeholders.
func (a *archive) addRecorded(paths []string, kinds map[string]recKind) {
	for _, p := range paths {
		if secret(p) {
			continue
		}
		k := kinds[p]
		if k&recChain != 0 || k&recLink != 0 {
			a.walk(p)
		}
		if k&recDir != 0 {
			a.addListing(p)
		}
	}
	for _, p := range paths {
		if !secret(p) && kinds[p]&recFile != 0 {
			a.addFile(p)
		}
	}
}

// addNodes adds what the readers stat'ed: device nodes to the manifest,
// links and directories as they are, a regular file stat'ed but not read
// as an empty placeholder.
func (a *archive) addNodes(nodes map[string]Node, kinds map[string]recKind) {
	for p, n := range nodes {
		switch n.Type {
		case TypeChar, TypeBlock:
			a.man.Add(n)
		case TypeSymlink:
			a.walk(p)
		case TypeDir:
			if strings.HasPrefix(p, "/proc/") && strings.Contains(p, "/root") {
				// A directory seen through a process's root: the manifest
				// keeps it, as the path it was seen at.
				a.man.Add(n)
				continue
			}
			a.addDir(p)
		case TypeRegular:
			// Stat'ed, not read (a 30 MiB libcuda.so): its existence is
			// what the reader used.
			final := a.walk(p)
			if _, ok := a.entries[final]; !ok && !secret(final) && kinds[p]&recFile == 0 {
				a.addDir(path.Dir(final))
				a.entries[final] = &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(final, "/"), Mode: 0o444}
			}
		}
	}
}

// addData adds a file of accel-doctor's own (manifest, description,
// captured kernel answers) at host path p.
func (a *archive) addData(p string, b []byte) {
	a.addDir(path.Dir(p))
	a.entries[p] = &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: 0o444, Size: int64(len(b))}
	a.data[p] = b
}

// write writes the entries as a gzip'd PAX tar, sorted by name.
func (a *archive) write(w io.Writer, created time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	keys := make([]string, 0, len(a.entries))
	for k := range a.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h := a.entries[k]
		h.ModTime = created
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			if _, err := tw.Write(a.data[k]); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// ReadSnapshotMeta returns the snapshot description inside an opened
// snapshot root, if it has a valid one.
func (r *Root) ReadSnapshotMeta() (SnapshotMeta, bool) {
	if r.live {
		return SnapshotMeta{}, false // the running host: no snapshot there
	}
	m, err := r.snapshotMeta()
	return m, err == nil
}

// TreeFormat is the format of tree archives: judged like directory trees.
const TreeFormat = 1

// WriteTreeArchive writes a whole directory tree (files, directories and
// symlinks; a device manifest travels as the file it is) as a snapshot
// archive, byte-for-byte the same for the same tree and meta: entries
// sorted, times zeroed. meta describes it (Tool and Source are kept;
// Format, Tree, Files and Nodes are filled in, Created stays zero) and
// travels last, as MetaPath. The built-in demo is made this way from a
// fixture tree. Like every reader here, it opens nothing but regular
// files.
func WriteTreeArchive(dir string, w io.Writer, meta SnapshotMeta) error {
	meta = SnapshotMeta{Format: TreeFormat, Tree: true, Tool: meta.Tool, Source: meta.Source}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0).UTC()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		name := filepath.ToSlash(rel)
		if "/"+name == MetaPath {
			return fmt.Errorf("%s: the tree holds its own %s; WriteTreeArchive writes it", p, MetaPath)
		}
		h := &tar.Header{Name: name, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, t, 0o777
		case d.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, name+"/", 0o755
		case d.Type().IsRegular():
			b, err := readRegularFile(p, defaultLimits.fileBytes)
			if err != nil {
				return err
			}
			if "/"+name == ManifestPath {
				m, err := ParseManifest(bytes.NewReader(b))
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				meta.Nodes = m.Len()
			}
			meta.Files++
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o444, int64(len(b))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		default:
			return fmt.Errorf("%s: %s cannot travel in a snapshot; describe it in %s", p, d.Type(), ManifestPath)
		}
		return tw.WriteHeader(h)
	})
	if err != nil {
		return err
	}
	mb, _ := json.MarshalIndent(meta, "", "  ")
	h := &tar.Header{Name: strings.TrimPrefix(MetaPath, "/"), ModTime: epoch, Format: tar.FormatPAX,
		Typeflag: tar.TypeReg, Mode: 0o444, Size: int64(len(mb))}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := tw.Write(mb); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// readRegularFile reads a regular file named by a plain path, opening
// nothing else (see openRegularFile).
func readRegularFile(p string, limit int64) ([]byte, error) {
	f, err := openRegularFile(p, limit, "bytes per file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// CapturedDir holds, in a snapshot, what readers took from the running
// kernel rather than from files (the BPF device programs of a cgroup2
// directory), so that a replay can answer what the live host answered.
const CapturedDir = "/.accel-doctor/captured"

// Capture hands a snapshot being recorded something read from the kernel,
// under a name (a relative path). Outside a recording it does nothing.
func (r *Root) Capture(name string, data []byte) {
	rec := r.recorder()
	if rec == nil {
		return
	}
	rec.mu.Lock()
	rec.synthetic[path.Clean(name)] = append([]byte(nil), data...)
	rec.mu.Unlock()
}

// Captured returns what a snapshot holds under name (see Capture).
func (r *Root) Captured(name string) ([]byte, bool) {
	if r.live {
		return nil, false // the running host's readers read it; nothing replays
	}
	b, err := r.ReadFile(path.Join(CapturedDir, path.Clean("/"+name)))
	return b, err == nil
}

// ReadFileRedacted reads like ReadFileLimit; a snapshot being recorded
// keeps the file only as redact returns it (nil: not at all). Readers of
// files that may hold secrets (an OCI config.json's process.env) use it.
func (r *Root) ReadFileRedacted(p string, limit int64, redact func([]byte) []byte) ([]byte, error) {
	if rec := r.recorder(); rec != nil {
		rec.mu.Lock()
		rec.redact[path.Clean(p)] = redact
		rec.mu.Unlock()
	}
	return r.ReadFileLimit(p, limit)
}
