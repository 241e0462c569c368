package lint

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kjson "sigs.k8s.io/json"

	"github.com/accel-doctor/accel-doctor/internal/report"
)

// CheckID is the Check of every lint finding.
const CheckID = "lint"

// Result is what Lint found.
type Result struct {
	Findings  []report.Finding
	Documents int // documents read (empty ones are not counted)
	Workloads int // objects with a pod template that the rules read
	Skipped   int // objects (documents or List items) of kinds lint does not read
	// NotObjects are documents that are no Kubernetes object: a mapping
	// with neither apiVersion nor kind (a tool's config file beside the
	// manifests).
	NotObjects int
	Malformed  int // documents that did not parse or decode
}

// workload is one pod template and where it came from.
type workload struct {
	source   string // "FILE, document N, line L"
	subject  string // "Deployment ns/name"
	spec     *corev1.PodSpec
	specPath string // the field path of spec in the object
	ns       string
	kind     string // Pod, Deployment, DaemonSet, ...
}

type item struct {
	f *report.Finding
	w *workload
	c *claimDoc // a ResourceClaim or ResourceClaimTemplate (read by the cluster rules)
}

// claimKey names a ResourceClaim or ResourceClaimTemplate of the input.
type claimKey struct{ kind, ns, name string }

type linter struct {
	res *Result
	// items are the documents' outcomes in input order: a finding of the
	// document itself (malformed, skipped), or a workload to lint.
	items []item
	// classes are the DeviceClass names each claim (or claim template)
	// of the input asks for.
	classes map[claimKey][]string
	// cluster is what --cluster read; nil offline.
	cluster *Cluster
	// defined are the RuntimeClasses and DeviceClasses the input itself
	// creates: applied with it, they exist (the cluster rules count them).
	defined map[string]map[string]bool
	// notJudged are the objects of kinds lint does not read, notObjects
	// the documents that are no Kubernetes object: each is reported once,
	// counted, after the workloads (skippedFindings).
	notJudged, notObjects []skippedDoc
}

// skippedDoc is a document (or List item) lint reads no further.
type skippedDoc struct {
	kind  string // the object's kind; "" for a document that is no object
	file  string
	index int // the document's, from 1
}

// Lint reads every input's documents and runs the rules on each workload.
// It never fails: what cannot be read is a finding.
func Lint(inputs []Input) *Result { return LintWith(inputs, nil) }

// LintWith is Lint with the cluster rules over what c holds (lint
// --cluster); c nil is Lint. The cluster is read by the caller: this
// package touches no network.
func LintWith(inputs []Input, c *Cluster) *Result {
	l := &linter{res: &Result{}, classes: map[claimKey][]string{}, cluster: c, defined: map[string]map[string]bool{}}
	for _, in := range inputs {
		for _, d := range splitDocuments(in.Data) {
			l.document(in.Name, d)
		}
	}
	// The rules run after every document is read: a pod's claim template
	// may come later in the input than the pod.
	for _, it := range l.items {
		if it.f != nil {
			l.res.Findings = append(l.res.Findings, *it.f)
			continue
		}
		if it.c != nil {
			l.deviceClassMissing(*it.c)
			continue
		}
		before := len(l.res.Findings)
		l.rules(*it.w)
		if c != nil {
			l.clusterRules(*it.w)
		}
		if !anyVerdict(l.res.Findings[before:]) {
			l.add(*it.w, CodeClean, fmt.Sprintf("%d container(s) read, no rule fired", countContainers(it.w.spec)), nil)
		}
	}
	l.res.Findings = append(l.res.Findings, l.skippedFindings()...)
	return l.res
}

func (l *linter) document(file string, d document) {
	l.res.Documents++
	where := fmt.Sprintf("%s, document %d", file, d.Index)
	if d.Err != nil {
		l.malformed(where, d.Line, d.Err)
		return
	}
	if len(d.Data) > MaxDocumentBytes {
		l.res.Malformed++
		l.emit(finding(CodeDocumentTooLarge, where,
			fmt.Sprintf("%d bytes, over the %d the API server accepts: not parsed", len(d.Data), MaxDocumentBytes),
			[]report.Evidence{{Path: "source", Value: fmt.Sprintf("%s, line %d", where, d.Line)}}))
		return
	}
	j, ok, err := toJSON(d)
	if err != nil {
		line, err := errorLine(d, err)
		l.malformed(where, line, err)
		return
	}
	if !ok {
		l.res.Documents-- // YAML null: an empty document
		return
	}
	if notAnObject(j) {
		l.res.NotObjects++
		l.notObjects = append(l.notObjects, skippedDoc{file: file, index: d.Index})
		return
	}
	l.object(fmt.Sprintf("%s, line %d", where, d.Line), where, skippedDoc{file: file, index: d.Index}, d.Line, j, 0)
}

// notAnObject: the document is a mapping with neither an apiVersion nor a
// kind key, spelt in any case: a file for some tool (a plugin's config, a
// values file) that sits beside the manifests, not something that claims
// to be a Kubernetes object. A mapping with one of the two, or with
// "Kind" or "apiversion" (a misspelt manifest), claims to be one and is
// judged as one, malformed when it is.
func notAnObject(j []byte) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(j, &m); err != nil {
		return false // not a mapping: malformed, as before
	}
	for k := range m {
		if strings.EqualFold(k, "apiVersion") || strings.EqualFold(k, "kind") {
			return false
		}
	}
	return true
}

func (l *linter) malformed(where string, line int, err error) {
	l.res.Malformed++
	l.emit(finding(CodeDocumentMalformed, where, fmt.Sprintf("line %d: %v", line, err),
		[]report.Evidence{{Path: "source", Value: fmt.Sprintf("%s, line %d", where, line)}}))
}

func (l *linter) emit(f report.Finding) { l.items = append(l.items, item{f: &f}) }

// typeMeta is what decides how a document is decoded.
type typeMeta struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Items      json.RawMessage `json:"items"` // decoded for Lists only: a custom resource may have its own "items"
}

// object decodes one object (a document, or an item of a List of the
// document doc).
func (l *linter) object(source, where string, doc skippedDoc, line int, j []byte, depth int) {
	var tm typeMeta
	// Case-sensitively, as the API server and kubectl read them: "Kind:"
	// is no kind there.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		l.malformed(where, line, fmt.Errorf("not an object of kind and apiVersion: %v", err))
		return
	}
	if tm.Kind == "" {
		l.malformed(where, line, fmt.Errorf("no kind: kubectl refuses it (\"Object 'Kind' is missing\")"))
		return
	}
	if tm.APIVersion == "" {
		l.malformed(where, line, fmt.Errorf("kind %s but no apiVersion: kubectl refuses it", tm.Kind))
		return
	}
	gvk := tm.APIVersion + "/" + tm.Kind
	if tm.Kind == "List" || (strings.HasSuffix(tm.Kind, "List") && tm.Items != nil) {
		if depth >= maxListDepth {
			l.malformed(where, line, fmt.Errorf("Lists nested deeper than %d", maxListDepth))
			return
		}
		var items []json.RawMessage
		if tm.Items != nil {
			if err := json.Unmarshal(tm.Items, &items); err != nil {
				l.malformed(where, line, fmt.Errorf("%s: items is not a list: %v", tm.Kind, err))
				return
			}
		}
		for i, it := range items {
			l.object(fmt.Sprintf("%s, item %d", source, i), fmt.Sprintf("%s, item %d", where, i), doc, line, it, depth+1)
		}
		return
	}
	var (
		meta     metav1.ObjectMeta
		spec     *corev1.PodSpec
		specPath string
		err      error
	)
	// Field names are matched case-sensitively, as the API server's
	// decoder does (apimachinery's json serializer uses sigs.k8s.io/json):
	// a "Resources:" key is unknown there, and so it is here.
	decode := func(v any) error { return kjson.UnmarshalCaseSensitivePreserveInts(j, v) }
	switch gvk {
	case "v1/Pod":
		var o corev1.Pod
		err, meta, spec, specPath = decode(&o), o.ObjectMeta, &o.Spec, "spec"
	case "apps/v1/Deployment":
		var o appsv1.Deployment
		err, meta, spec, specPath = decode(&o), o.ObjectMeta, &o.Spec.Template.Spec, "spec.template.spec"
	case "apps/v1/StatefulSet":
		var o appsv1.StatefulSet
		err, meta, spec, specPath = decode(&o), o.ObjectMeta, &o.Spec.Template.Spec, "spec.template.spec"
	case "apps/v1/DaemonSet":
		var o appsv1.DaemonSet
		err, meta, spec, specPath = decode(&o), o.ObjectMeta, &o.Spec.Template.Spec, "spec.template.spec"
	case "apps/v1/ReplicaSet":
		var o appsv1.ReplicaSet
		err, meta, spec, specPath = decode(&o), o.ObjectMeta, &o.Spec.Template.Spec, "spec.template.spec"
	case "batch/v1/Job":
		var o batchv1.Job
		err, meta, spec, specPath = decode(&o), o.ObjectMeta, &o.Spec.Template.Spec, "spec.template.spec"
	case "batch/v1/CronJob":
		var o batchv1.CronJob
		err, meta, spec, specPath = decode(&o), o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec, "spec.jobTemplate.spec.template.spec"
	case "resource.k8s.io/v1/ResourceClaim":
		var o resourcev1.ResourceClaim
		if err := decode(&o); err != nil {
			l.malformed(where, line, fmt.Errorf("%s: %v", tm.Kind, err))
			return
		}
		key := claimKey{"ResourceClaim", o.Namespace, o.Name}
		l.classes[key] = deviceClasses(o.Spec)
		l.items = append(l.items, item{c: &claimDoc{source: source, subject: subjectOf(tm.Kind, o.ObjectMeta), requests: classRequests(o.Spec, "spec")}})
		return
	case "resource.k8s.io/v1/ResourceClaimTemplate":
		var o resourcev1.ResourceClaimTemplate
		if err := decode(&o); err != nil {
			l.malformed(where, line, fmt.Errorf("%s: %v", tm.Kind, err))
			return
		}
		key := claimKey{"ResourceClaimTemplate", o.Namespace, o.Name}
		l.classes[key] = deviceClasses(o.Spec.Spec)
		l.items = append(l.items, item{c: &claimDoc{source: source, subject: subjectOf(tm.Kind, o.ObjectMeta), requests: classRequests(o.Spec.Spec, "spec.spec")}})
		return
	default:
		l.skipped(doc, tm, j)
		return
	}
	if err != nil {
		l.malformed(where, line, fmt.Errorf("%s: %v", tm.Kind, err))
		return
	}
	l.res.Workloads++
	l.items = append(l.items, item{w: &workload{source: source, subject: subjectOf(tm.Kind, meta), spec: spec, specPath: specPath, ns: meta.Namespace, kind: tm.Kind}})
}

// skipped records an object of a kind lint does not read (the cluster
// rules still learn the classes the input creates).
func (l *linter) skipped(doc skippedDoc, tm typeMeta, j []byte) {
	l.res.Skipped++
	switch gvk := tm.APIVersion + "/" + tm.Kind; gvk {
	case "node.k8s.io/v1/RuntimeClass", "resource.k8s.io/v1/DeviceClass":
		var o struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		_ = json.Unmarshal(j, &o) // a bad name leaves it empty: no class named so
		if l.defined[tm.Kind] == nil {
			l.defined[tm.Kind] = map[string]bool{}
		}
		l.defined[tm.Kind][o.Metadata.Name] = true
	}
	doc.kind = tm.Kind
	l.notJudged = append(l.notJudged, doc)
}

// skippedFindings are one NOT_RUN finding for all the objects lint does
// not judge, and one for all the documents that are no Kubernetes object:
// a count, the kinds, where they are. One line each, not one per object:
// a directory of manifests holds many (RBAC, Namespaces, kustomizations)
// and none of them is a verdict.
func (l *linter) skippedFindings() []report.Finding {
	var out []report.Finding
	if n := len(l.notJudged); n > 0 {
		kinds := map[string]int{}
		for _, d := range l.notJudged {
			kinds[d.kind]++
		}
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Strings(names)
		for i, k := range names {
			if kinds[k] > 1 {
				names[i] = fmt.Sprintf("%s x%d", k, kinds[k])
			}
		}
		f := finding(CodeKindSkipped, "objects not judged",
			fmt.Sprintf("not judged: %d %s (%s)", n, plural(n, "object"), strings.Join(names, ", ")),
			[]report.Evidence{{Path: "sources", Value: sources(l.notJudged)}})
		f.CouldNotLook(report.Explain("no pod template lint reads (lint reads Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, and ResourceClaims for their classes)",
			"Nothing to do for objects that run no pod. For a kustomization, lint what it renders (`kubectl kustomize DIR | accel-doctor lint -f -`); for a custom resource whose operator makes pods, lint the Pod it makes (`kubectl get pod POD -o yaml > pod.yaml; accel-doctor lint -f pod.yaml`)."))
		out = append(out, f)
	}
	if n := len(l.notObjects); n > 0 {
		f := finding(CodeNotAnObject, "not Kubernetes objects",
			fmt.Sprintf("skipped: %d %s with no apiVersion and no kind, not a Kubernetes object", n, plural(n, "document")),
			[]report.Evidence{{Path: "sources", Value: sources(l.notObjects)}})
		f.CouldNotLook(report.Explain("not a Kubernetes object (a mapping with neither apiVersion nor kind): nothing for lint to read",
			"Nothing to do if the file is for another tool (a plugin's config, Helm values); if it is meant as a manifest, add its apiVersion and kind."))
		out = append(out, f)
	}
	return out
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// sources says where skipped documents are, file by file in input
// order: "a.yaml documents 1, 2; b.yaml document 1".
func sources(ds []skippedDoc) string {
	var files []string
	idx := map[string][]int{}
	for _, d := range ds {
		if _, ok := idx[d.file]; !ok {
			files = append(files, d.file)
		}
		if is := idx[d.file]; len(is) == 0 || is[len(is)-1] != d.index {
			idx[d.file] = append(is, d.index)
		}
	}
	parts := make([]string, len(files))
	for i, f := range files {
		nums := make([]string, len(idx[f]))
		for j, n := range idx[f] {
			nums[j] = strconv.Itoa(n)
		}
		parts[i] = fmt.Sprintf("%s %s %s", f, plural(len(nums), "document"), strings.Join(nums, ", "))
	}
	return strings.Join(parts, "; ")
}

func subjectOf(kind string, m metav1.ObjectMeta) string {
	name := m.Name
	if name == "" {
		name = m.GenerateName + "*"
		if m.GenerateName == "" {
			name = "(unnamed)"
		}
	}
	if m.Namespace != "" {
		name = m.Namespace + "/" + name
	}
	return kind + " " + name
}

// deviceClasses are the DeviceClasses a claim spec's requests name, in
// order: classRequests without their field paths.
func deviceClasses(s resourcev1.ResourceClaimSpec) []string {
	var out []string
	for _, r := range classRequests(s, "") {
		out = append(out, r.class)
	}
	return out
}

func finding(code, subject, summary string, ev []report.Evidence) report.Finding {
	c, ok := Lookup(code)
	if !ok {
		panic("lint: code not in the catalog: " + code) // a programming error, caught by the tests
	}
	st := report.Status(c.Status)
	f := report.Finding{Check: CheckID, Code: code, Layer: report.LayerKube, Status: st,
		Subject: subject, Summary: summary, Evidence: ev}
	if st == report.Warn || st == report.Fail {
		// A NOT_RUN's fix is its why's (Finding.CouldNotLook): the
		// catalog's is for the WARN or FAIL the rule would have judged.
		f.Remediation = c.Remediation
	}
	return f
}

// add records a rule's finding on a workload; the source comes first in
// the evidence.
func (l *linter) add(w workload, code, summary string, ev []report.Evidence) {
	ev = append([]report.Evidence{{Path: "source", Value: w.source}}, ev...)
	l.res.Findings = append(l.res.Findings, finding(code, w.subject, summary, ev))
}

func countContainers(s *corev1.PodSpec) int {
	return len(s.Containers) + len(s.InitContainers) + len(s.EphemeralContainers)
}
