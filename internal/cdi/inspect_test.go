package cdi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/accel-doctor/accel-doctor/internal/runtime"
	"github.com/accel-doctor/accel-doctor/internal/testutil"
)

func i64(v int64) *int64 { return &v }

func mechKinds(inj *Injection) []MechanismKind {
	var out []MechanismKind
	for _, m := range inj.Mechanisms {
		out = append(out, m.Kind)
	}
	return out
}

// TestCorpusCRIOConfig: the real CRI-O container config of an FPGA
// container is plain linux.devices (one FPGA port, c 243:0), with a
// device rule set that denies all but it, and a createRuntime hook that
// is the FPGA plugin's, not NVIDIA's.
func TestCorpusCRIOConfig(t *testing.T) {
	p := filepath.Join(testutil.CorpusDir(t), "intel-device-plugins", "oci-config-crio-fpga.json")
	root := openRoot(t, filepath.Dir(p))
	s, err := runtime.ReadSpec(root, "/"+filepath.Base(p))
	if err != nil {
		t.Fatal(err)
	}
	inj := Inspect(s)
	if got := mechKinds(inj); len(got) != 1 || got[0] != MechLinuxDevices {
		t.Fatalf("mechanisms %v:%s", got, dump(inj.Facts))
	}
	m := inj.Mechanisms[0]
	if len(m.Devices) != 1 || m.Devices[0] != "c 243:0 /dev/intel-fpga-port.0" {
		t.Errorf("devices %v", m.Devices)
	}
	if len(inj.CDI) != 0 || inj.NvidiaEnv != nil || len(inj.NvidiaHooks) != 0 || len(inj.CDIHooks) != 0 || inj.Privilege.AllowAll || inj.Privilege.DevBind {
		t.Errorf("%+v", inj)
	}
	noKind(t, inj.Facts, KindNoMechanism, KindConflictPriv, KindConflictEnvCDI, KindConflictTwice, KindAnnotationInvalid)
	// Through Container too: no CDI, so no spec directories are read.
	res := Container(openRoot(t, t.TempDir()), s, Options{})
	if len(res.Resolutions) != 0 || hasKind(res.Facts, KindRuntimeNone) || hasKind(res.Facts, KindSpecNone) {
		t.Errorf("%s", dump(res.Facts))
	}
}

func baseSpec() *specs.Spec {
	return &specs.Spec{
		Process: &specs.Process{Env: []string{"PATH=/usr/bin"}},
		Linux:   &specs.Linux{Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}}},
	}
}

func TestInspectCDIAnnotations(t *testing.T) {
	s := baseSpec()
	s.Annotations = map[string]string{
		"cdi.k8s.io/nvidia-device-plugin_abc": "nvidia.com/gpu=0,nvidia.com/gpu=1",
		"cdi.k8s.io/gpu.nvidia.com_claim1":    "nvidia.com/gpu=1",
		"example.com/dra-devices":             "example.com/nic=vf0",
		"io.kubernetes.pod.name":              "p",
	}
	inj := Inspect(s)
	if got := inj.Names(false); strings.Join(got, ",") != "nvidia.com/gpu=1,nvidia.com/gpu=0" {
		t.Errorf("honoured names %v", got) // sorted keys: gpu.nvidia.com_claim1 first
	}
	if got := inj.Names(true); len(got) != 3 {
		t.Errorf("all names %v", got)
	}
	tw := mustKind(t, inj.Facts, KindConflictTwice)
	if tw.Subject != "nvidia.com/gpu=1" {
		t.Errorf("%+v", tw)
	}
	if got := mechKinds(inj); len(got) != 1 || got[0] != MechCDI {
		t.Errorf("%v", got)
	}
	// One bad key: the library's words, and the runtime's refusal.
	s.Annotations["cdi.k8s.io/bad"] = "nvidia.com/gpu=0,gpu1"
	inj = Inspect(s)
	bad := mustKind(t, inj.Facts, KindAnnotationInvalid)
	if bad.Subject != "cdi.k8s.io/bad" || !strings.Contains(bad.Summary, `invalid CDI device name "gpu1"`) {
		t.Errorf("%+v", bad)
	}
}

func TestInspectCRIOCopy(t *testing.T) {
	kube, _ := json.Marshal(map[string]string{"cdi.k8s.io/vendor_x": "vendor.com/dev=a", "other": "x"})
	s := baseSpec()
	s.Annotations = map[string]string{CRIOAnnotations: string(kube)}
	inj := Inspect(s)
	if len(inj.CDI) != 1 || inj.CDI[0].Source != SourceCRIOCopy || !inj.CDI[0].Honoured {
		t.Fatalf("%+v", inj.CDI)
	}
	// Kept in both places: one request, not two.
	s.Annotations["cdi.k8s.io/vendor_x"] = "vendor.com/dev=a"
	inj = Inspect(s)
	if len(inj.CDI) != 1 || inj.CDI[0].Source != SourceAnnotation {
		t.Errorf("%+v", inj.CDI)
	}
	noKind(t, inj.Facts, KindConflictTwice)
	s.Annotations[CRIOAnnotations] = "{not json"
	mustKind(t, Inspect(s).Facts, KindAnnotationInvalid)
}

func TestInspectLegacyNvidia(t *testing.T) {
	s := baseSpec()
	s.Process.Env = append(s.Process.Env, "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
	s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: "/usr/bin/nvidia-container-runtime-hook", Args: []string{"nvidia-container-runtime-hook", "prestart"}}}}
	inj := Inspect(s)
	if got := mechKinds(inj); len(got) != 1 || got[0] != MechNvidiaLegacy {
		t.Fatalf("%v", got)
	}
	m := inj.Mechanisms[0]
	if !strings.Contains(m.Summary, "hooks.prestart") || len(m.Devices) != 1 || m.Devices[0] != "all" {
		t.Errorf("%+v", m)
	}
	// The hook's program on the host: missing here.
	dir := hostTree(t, nil, "", nil)
	res := Container(openRoot(t, dir), s, Options{})
	hm := mustKind(t, res.Facts, KindHookMissing)
	if !strings.Contains(hm.Summary, "legacy NVIDIA hook /usr/bin/nvidia-container-runtime-hook") || hm.Evidence[0].Path != "hooks.prestart[0]" {
		t.Errorf("%+v", hm)
	}
	// ... and present.
	dir = hostTree(t, nil, "", map[string]os.FileMode{"/usr/bin/nvidia-container-runtime-hook": 0o755})
	mustKind(t, Container(openRoot(t, dir), s, Options{}).Facts, KindHookOK)

	// Env only (CUDA images set it themselves), no hook.
	s.Hooks = nil
	inj = Inspect(s)
	if !strings.Contains(inj.Mechanisms[0].Summary, "no NVIDIA hook is in the spec") {
		t.Error(inj.Mechanisms[0].Summary)
	}
	// A redacted value (a snapshot): presence only.
	s.Process.Env = []string{"NVIDIA_VISIBLE_DEVICES=" + runtime.Redacted}
	inj = Inspect(s)
	if inj.NvidiaEnv == nil || inj.NvidiaEnv.Kind != VisibleUnknown {
		t.Errorf("%+v", inj.NvidiaEnv)
	}
	// A value that is no device list.
	s.Process.Env = []string{"NVIDIA_VISIBLE_DEVICES=0,,1"}
	mustKind(t, Inspect(s).Facts, KindNvidiaEnvInvalid)
}

func TestInspectConflicts(t *testing.T) {
	t.Run("env with CDI", func(t *testing.T) {
		s := baseSpec()
		s.Annotations = map[string]string{"cdi.k8s.io/p_0": "nvidia.com/gpu=0"}
		s.Process.Env = append(s.Process.Env, "NVIDIA_VISIBLE_DEVICES=all")
		f := mustKind(t, Inspect(s).Facts, KindConflictEnvCDI)
		if !strings.Contains(f.Summary, "nvidia.com/gpu=0") {
			t.Error(f.Summary)
		}
		// void is "as if unset": no conflict.
		s.Process.Env[1] = "NVIDIA_VISIBLE_DEVICES=void"
		noKind(t, Inspect(s).Facts, KindConflictEnvCDI)
	})
	t.Run("env with CDI edits already applied", func(t *testing.T) {
		s := baseSpec()
		s.Process.Env = append(s.Process.Env, "NVIDIA_VISIBLE_DEVICES=0")
		s.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{{Path: "/usr/bin/nvidia-cdi-hook", Args: []string{"nvidia-cdi-hook", "update-ldcache"}}}}
		inj := Inspect(s)
		mustKind(t, inj.Facts, KindConflictEnvCDI)
		if len(inj.CDIHooks) != 1 || !strings.Contains(dump(inj.Facts), "names no CDI device") {
			t.Errorf("%s", dump(inj.Facts))
		}
	})
	t.Run("privileged", func(t *testing.T) {
		s := baseSpec()
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}, {Allow: true, Access: "rwm"}}
		s.Mounts = []specs.Mount{{Destination: "/dev", Source: "/dev", Type: "bind", Options: []string{"rbind"}}}
		s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}}
		s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: []string{"CAP_SYS_ADMIN"}}
		inj := Inspect(s)
		if !inj.Privilege.AllowAll || !inj.Privilege.DevBind || !inj.Privilege.SysAdmin {
			t.Errorf("%+v", inj.Privilege)
		}
		f := mustKind(t, inj.Facts, KindConflictPriv)
		if !strings.Contains(f.Summary, "sees and may open every host device") || !strings.Contains(f.Summary, "linux.devices") {
			t.Error(f.Summary)
		}
		// A deny after the allow-all: not everything.
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: false, Type: "c", Major: i64(195), Access: "rwm"})
		inj = Inspect(s)
		if inj.Privilege.AllowAll {
			t.Error("a deny after allow-all still reads as allow-all")
		}
		noKind(t, inj.Facts, KindConflictPriv)
		// /dev bind-mounted alone is still a mechanism.
		if got := mechKinds(inj); got[len(got)-1] != MechPrivileged {
			t.Errorf("%v", got)
		}
	})
	t.Run("node twice", func(t *testing.T) {
		s := baseSpec()
		s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/nvidia0", Type: "c", Major: 195}, {Path: "/dev//nvidia0", Type: "c", Major: 195}}
		mustKind(t, Inspect(s).Facts, KindConflictTwice)
	})
	t.Run("nothing asked", func(t *testing.T) {
		mustKind(t, Inspect(baseSpec()).Facts, KindNoMechanism)
		mustKind(t, Inspect(nil).Facts, KindNoMechanism)
	})
}

// TestContainerResolvesEveryName: checkpoint 2 for a container whose
// annotations name a device the specs resolve and one they do not (an
// "all"-only spec for another kind).
func TestContainerResolvesEveryName(t *testing.T) {
	files := gpuHost(t, nvidiaSpec)
	files["/var/run/cdi/amd.yaml"] = strings.ReplaceAll(allOnlySpec, "nvidia.com/gpu", "amd.com/gpu")
	dir := hostTree(t, files, gpuManifest, hookExec)
	s := baseSpec()
	s.Annotations = map[string]string{"cdi.k8s.io/a": "nvidia.com/gpu=0", "cdi.k8s.io/b": "amd.com/gpu=1"}
	res := Container(openRoot(t, dir), s, Options{})
	if len(res.Resolutions) != 2 {
		t.Fatalf("%+v", res.Resolutions)
	}
	ok := mustKind(t, res.Facts, KindDeviceResolved)
	if ok.Evidence[0].Path != "annotations[cdi.k8s.io/a]" {
		t.Errorf("%+v", ok.Evidence)
	}
	un := mustKind(t, res.Facts, KindDeviceUnresolved)
	if un.Subject != "amd.com/gpu=1" || !strings.Contains(un.Summary, `declare only "all"`) {
		t.Errorf("%+v", un)
	}
	mustKind(t, res.Facts, KindHookOK)
	mustKind(t, res.Facts, KindMechanism)
}

func TestParseNvidiaVisible(t *testing.T) {
	for _, c := range []struct {
		in    string
		kind  VisibleKind
		forms string
	}{
		{"all", VisibleAll, ""}, {"none", VisibleNone, ""}, {"void", VisibleVoid, ""}, {"", VisibleVoid, ""},
		{"0,1", VisibleList, "index,index"}, {"0:1", VisibleList, "mig-index"},
		{"GPU-4b1d2c7e-5f7a-4e3b-9c1d-0a2b3c4d5e6f", VisibleList, "uuid"},
		{"MIG-GPU-4b1d2c7e-5f7a-4e3b-9c1d-0a2b3c4d5e6f/1/0", VisibleList, "uuid"},
		{"nvidia.com/gpu=0, nvidia.com/gpu=1", VisibleList, "cdi,cdi"},
		{"0,", VisibleMalformed, ""}, {"gpu0", VisibleMalformed, ""}, {"ALL", VisibleMalformed, ""},
		{runtime.Redacted, VisibleUnknown, ""},
	} {
		got := ParseNvidiaVisible(c.in)
		var forms []string
		for _, d := range got.Devices {
			forms = append(forms, d.Form)
		}
		if got.Kind != c.kind || strings.Join(forms, ",") != c.forms || (got.Kind == VisibleMalformed) != (got.Err != nil) {
			t.Errorf("%q: %+v", c.in, got)
		}
	}
}

func FuzzParseNvidiaVisible(f *testing.F) {
	for _, s := range []string{"all", "0,1", "GPU-abc", "nvidia.com/gpu=0", "0:1,", runtime.Redacted} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := ParseNvidiaVisible(v)
		if (got.Kind == VisibleMalformed) != (got.Err != nil) {
			t.Fatalf("%q: %+v", v, got)
		}
		if got.Kind == VisibleList && len(got.Devices) == 0 {
			t.Fatalf("%q: an empty list", v)
		}
		_ = got.String()
	})
}

// FuzzInspectAnnotations: annotation keys and values and env values are
// the container's, untrusted; Inspect must neither panic nor invent a
// request from a value that is not a qualified name list.
func FuzzInspectAnnotations(f *testing.F) {
	f.Add("cdi.k8s.io/x", "nvidia.com/gpu=0,nvidia.com/gpu=1", "NVIDIA_VISIBLE_DEVICES=0")
	f.Add(CRIOAnnotations, `{"cdi.k8s.io/y":"a.com/b=c"}`, "NVIDIA_VISIBLE_DEVICES=all")
	f.Add("other", "vendor.com/x=1", "X=1")
	f.Fuzz(func(t *testing.T, k, v, env string) {
		s := baseSpec()
		s.Annotations = map[string]string{k: v}
		s.Process.Env = []string{env}
		inj := Inspect(s)
		for _, r := range inj.CDI {
			if !strings.Contains(r.Name, "=") || !strings.Contains(r.Name, "/") {
				t.Fatalf("request %q from %q=%q", r.Name, k, v)
			}
		}
		for _, f := range inj.Facts {
			if _, ok := CodeOf(f.Kind); !ok {
				t.Fatalf("kind %s has no code", f.Kind)
			}
		}
	})
}
