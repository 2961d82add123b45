// Package manifest reads Kubernetes manifests (multi-document YAML or JSON)
// from files, directories or a stream, and decodes the kinds nodewright
// understands into typed objects: Karpenter's NodePool, NodeClaim and
// EC2NodeClass (shared/apis/v1), and the Pods, Nodes, workload controllers
// PodDisruptionBudgets and storage objects (PersistentVolumeClaims,
// PersistentVolumes, StorageClasses, CSINodes) the solver reasons about.
//
// Decoding follows the Kubernetes API server: field names are
// case-sensitive, and for the three Karpenter kinds unknown fields are
// reported as warnings with their path. Reading never panics on bad input;
// every problem is returned as a *DocumentError naming the document.
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/shared/apis/apijson"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Messages of the warnings that the API server's strict field validation
// (kubectl apply's default) would turn into a rejection: see Strict.
const (
	MessageUnknownCoreField   = "unknown field (not in the Kubernetes API); ignored"
	MessageUnsupportedVersion = "object skipped"
)

// Strict reports whether w is a warning that kubectl apply, with its
// default strict field validation, would reject: an unknown or duplicate
// field (v1.MessageUnknownField, v1.MessageDuplicateField,
// MessageUnknownCoreField) or a Karpenter kind in an API version Karpenter
// v1.14.1 does not serve.
func Strict(w v1.FieldError) bool {
	switch {
	case w.Message == v1.MessageUnknownField, w.Message == v1.MessageDuplicateField, w.Message == MessageUnknownCoreField:
		return true
	case w.Path == "apiVersion" && strings.HasSuffix(w.Message, "; "+MessageUnsupportedVersion):
		return true
	}
	return false
}

// Object is one Kubernetes object read from a manifest.
type Object struct {
	// Source says where the object came from: "<path>#<n>" where n is the
	// 1-based position of the document in the file (empty documents count),
	// with ".items[i]" appended for an item of a List.
	Source string
	// APIVersion, Kind, Namespace and Name are copied from the object
	// (empty when absent).
	APIVersion, Kind, Namespace, Name string
	// Raw is the object as JSON.
	Raw []byte
	// Typed is a pointer to the decoded object for the kinds listed in the
	// package doc (*v1.NodePool, *v1.NodeClaim, *v1.EC2NodeClass,
	// *corev1.Pod, *corev1.Node, *appsv1.Deployment, *appsv1.ReplicaSet,
	// *appsv1.StatefulSet, *appsv1.DaemonSet, *batchv1.Job,
	// *policyv1.PodDisruptionBudget, *corev1.PersistentVolumeClaim,
	// *corev1.PersistentVolume, *storagev1.StorageClass, *storagev1.CSINode),
	// and nil for every other kind.
	// It is neither defaulted nor validated.
	Typed any
	// Warnings lists fields that were read but not used: for the three
	// Karpenter kinds, fields unknown to Karpenter v1.14.1 (tolerated, never
	// an error) and the v1.14.1 consolidateAfter subtlety (see
	// v1.DecodeNodePool); for a Karpenter kind of an unsupported API version,
	// a note on apiVersion.
	Warnings []v1.FieldError
}

// DocumentError is a document that could not be read: not valid YAML or
// JSON, or a known kind whose fields do not decode.
type DocumentError struct {
	// Source is "<path>#<n>" as in Object.Source.
	Source string
	// Kind and Name identify the object when they could be read.
	Kind, Name string
	// Path is the field path of the bad value ("spec.weight"); empty when the
	// document itself is malformed.
	Path string
	// Err describes the problem.
	Err error
	// Partial, set on the first error of an object whose bad values could
	// all be located, is the object decoded without those values, so that a
	// caller can still check the rest of it (validate does). It is not among
	// the objects Read returns.
	Partial *Object
}

// Error formats as `<source>: <Kind> "<name>": <path>: <problem>`, leaving
// out the parts that are unknown.
func (e *DocumentError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	b.WriteString(": ")
	if e.Kind != "" {
		fmt.Fprintf(&b, "%s %q: ", e.Kind, e.Name)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *DocumentError) Unwrap() error { return e.Err }

// Read reads every document of r, naming them "<source>#<n>". Documents that
// are empty (or only comments) are skipped. A document that is not a
// mapping, lacks a string kind or apiVersion, repeats a key, or names a kind
// the Karpenter API groups do not define is an error. It returns the objects it could read, in order, and an
// error joining one *DocumentError per document it could not (nil when
// there is none), so that a caller can report every bad document at once.
func Read(r io.Reader, source string) ([]Object, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", source, err)
	}
	return parse(data, source)
}

// parse splits data into documents and decodes each.
func parse(data []byte, source string) ([]Object, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var objs []Object
	var errs []error
	for _, doc := range split(data) {
		src := source + "#" + strconv.Itoa(doc.number)
		got, err := decodeDocument(doc, src)
		objs = append(objs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return objs, errors.Join(errs...)
}

// document is one YAML or JSON document of a stream.
type document struct {
	number    int    // 1-based position in the stream
	firstLine int    // 1-based line of the stream where the document starts
	text      []byte // the document itself
	json      bool   // text is already JSON
}

var separator = regexp.MustCompile(`^(---|\.\.\.)(\s.*)?$`)

// split cuts a stream into documents. A stream that is a sequence of JSON
// values is split on value boundaries; anything else is YAML, split on
// "---" (and "...") lines.
func split(data []byte) []document {
	if docs, ok := splitJSON(data); ok {
		return docs
	}
	var docs []document
	cur := document{number: 1, firstLine: 1}
	var buf bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if separator.MatchString(strings.TrimRight(text, "\r")) {
			if line > 1 || buf.Len() > 0 {
				cur.text = bytes.Clone(buf.Bytes())
				docs = append(docs, cur)
				cur = document{number: cur.number + 1}
			}
			cur.firstLine = line + 1
			buf.Reset()
			continue
		}
		buf.WriteString(text)
		buf.WriteByte('\n')
	}
	cur.text = bytes.Clone(buf.Bytes())
	return append(docs, cur)
}

// splitJSON returns the values of a stream of JSON values, or false when
// data is not entirely JSON.
func splitJSON(data []byte) ([]document, bool) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var docs []document
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return docs, true
		}
		if err != nil {
			return nil, false
		}
		docs = append(docs, document{number: len(docs) + 1, firstLine: 1, text: raw, json: true})
	}
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// toJSON converts one document to JSON; it returns nil for an empty
// document. YAML line numbers in errors are made relative to the stream.
func toJSON(doc document) (out []byte, err error) {
	if doc.json {
		return doc.text, nil
	}
	defer func() {
		// The YAML parser is third-party code fed with arbitrary input: a
		// bug there must become an error, not a crash.
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("not valid YAML: parser failure: %v", r)
		}
	}()
	j, err := yaml.YAMLToJSON(doc.text)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		msg = yamlLine.ReplaceAllStringFunc(msg, func(m string) string {
			n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
			return "line " + strconv.Itoa(n+doc.firstLine-1)
		})
		return nil, fmt.Errorf("not valid YAML: %s", msg)
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return nil, nil
	}
	return j, nil
}

// header is the part of every object needed to route it.
type header struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

func readHeader(m map[string]json.RawMessage) header {
	var h header
	_ = json.Unmarshal(m["apiVersion"], &h.APIVersion)
	_ = json.Unmarshal(m["kind"], &h.Kind)
	var meta map[string]json.RawMessage
	if json.Unmarshal(m["metadata"], &meta) == nil {
		_ = json.Unmarshal(meta["name"], &h.Name)
		_ = json.Unmarshal(meta["namespace"], &h.Namespace)
		if h.Name == "" {
			_ = json.Unmarshal(meta["generateName"], &h.Name)
		}
	}
	return h
}

func decodeDocument(doc document, source string) ([]Object, error) {
	raw, err := toJSON(doc)
	if err != nil {
		return nil, &DocumentError{Source: source, Err: err}
	}
	if raw == nil {
		return nil, nil
	}
	if dups := duplicateKeys(doc.text, doc.firstLine); len(dups) > 0 {
		var m map[string]json.RawMessage
		var h header
		if json.Unmarshal(raw, &m) == nil {
			h = readHeader(m)
		}
		errs := make([]error, 0, len(dups))
		for _, d := range dups {
			errs = append(errs, &DocumentError{Source: source, Kind: h.Kind, Name: h.Name, Path: d.path, Err: d.err})
		}
		return nil, errors.Join(errs...)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		// kubectl rejects these too: a manifest is a mapping.
		return nil, &DocumentError{Source: source, Err: fmt.Errorf("expected an object with apiVersion and kind, got %s", jsonKind(raw))}
	}
	h := readHeader(m)
	if isList(h, m) {
		return decodeList(h, m, source)
	}
	obj, err := decodeObject(h, raw, source)
	if err != nil {
		return nil, err
	}
	return []Object{obj}, nil
}

// isList reports whether the object is a v1 List or a typed list
// (NodePoolList, PodList, ...) carrying items.
func isList(h header, m map[string]json.RawMessage) bool {
	_, hasItems := m["items"]
	return hasItems && strings.HasSuffix(h.Kind, "List")
}

func decodeList(h header, m map[string]json.RawMessage, source string) ([]Object, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(m["items"], &items); err != nil {
		return nil, &DocumentError{Source: source, Kind: h.Kind, Name: h.Name, Path: "items", Err: errors.New("expected a list")}
	}
	itemKind := strings.TrimSuffix(h.Kind, "List")
	var objs []Object
	var errs []error
	for i, item := range items {
		src := fmt.Sprintf("%s.items[%d]", source, i)
		var im map[string]json.RawMessage
		if json.Unmarshal(item, &im) != nil {
			errs = append(errs, &DocumentError{Source: src, Err: errors.New("list item is not an object")})
			continue
		}
		ih := readHeader(im)
		if ih.Kind == "" && h.Kind != "List" {
			// Items of a typed list may omit their kind and apiVersion.
			ih.Kind, ih.APIVersion = itemKind, h.APIVersion
		}
		obj, err := decodeObject(ih, item, src)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errors.Join(errs...)
}

// decodeObject decodes raw into the type registered for its apiVersion and
// kind; other kinds come back with Typed nil. When values do not fit their
// fields, every such value is reported (one *DocumentError each, joined) and
// the first error carries the object decoded without them in Partial.
func decodeObject(h header, raw []byte, source string) (Object, error) {
	if err := checkHeader(h, raw, source); err != nil {
		return Object{}, err
	}
	obj := Object{Source: source, APIVersion: h.APIVersion, Kind: h.Kind, Namespace: h.Namespace, Name: h.Name, Raw: raw}
	group, version := splitAPIVersion(h.APIVersion)
	var decode decodeFunc
	switch {
	case group == v1.Group && version == "v1" && h.Kind == v1.KindNodePool:
		decode = func(b []byte) (any, []v1.FieldError, error) { return v1.DecodeNodePool(b) }
	case group == v1.Group && version == "v1" && h.Kind == v1.KindNodeClaim:
		decode = func(b []byte) (any, []v1.FieldError, error) { return v1.DecodeNodeClaim(b) }
	case group == v1.AWSGroup && version == "v1" && h.Kind == v1.KindEC2NodeClass:
		decode = func(b []byte) (any, []v1.FieldError, error) { return v1.DecodeEC2NodeClass(b) }
	case (group == v1.Group || group == v1.AWSGroup) && isKarpenterKind(h.Kind):
		obj.Warnings = []v1.FieldError{{
			Path:    "apiVersion",
			Message: fmt.Sprintf("%s %s is not supported (only karpenter.sh/v1 and karpenter.k8s.aws/v1); "+MessageUnsupportedVersion, h.APIVersion, h.Kind),
		}}
		return obj, nil
	default:
		if newCoreObject(group, version, h.Kind) == nil {
			return obj, nil
		}
		decode = func(b []byte) (any, []v1.FieldError, error) {
			target := newCoreObject(group, version, h.Kind)
			strays, err := apijson.Unmarshal(b, target)
			var warnings []v1.FieldError
			for _, s := range strays {
				msg := MessageUnknownCoreField
				if s.Duplicate {
					msg = v1.MessageDuplicateField
				}
				warnings = append(warnings, v1.FieldError{Path: s.Path, Message: msg})
			}
			return target, warnings, err
		}
	}
	typed, warnings, errs := decodeAll(raw, decode)
	if len(errs) == 0 {
		obj.Typed, obj.Warnings = typed, warnings
		return obj, nil
	}
	des := make([]error, 0, len(errs))
	var first *DocumentError
	for _, err := range errs {
		de := &DocumentError{Source: source, Kind: h.Kind, Name: h.Name, Err: err}
		var fe *apijson.FieldError
		if errors.As(err, &fe) {
			de.Path, de.Err = fe.Path, fe.Err
		}
		if first == nil {
			first = de
		}
		des = append(des, de)
	}
	if typed != nil {
		partial := obj
		partial.Typed, partial.Warnings = typed, warnings
		first.Partial = &partial
	}
	return Object{}, errors.Join(des...)
}

// checkHeader rejects what the API server would not route: a kind or
// apiVersion that is missing or not a string, and a kind that the
// Karpenter API groups do not define (a misspelt "Nodepool" would otherwise
// be skipped as a foreign kind and the object silently left unchecked).
func checkHeader(h header, raw []byte, source string) error {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	fail := func(path, msg string) error {
		return &DocumentError{Source: source, Kind: h.Kind, Name: h.Name, Path: path, Err: errors.New(msg)}
	}
	for _, f := range []string{"kind", "apiVersion"} {
		v, ok := m[f]
		var str string
		switch {
		case !ok && f == "kind" && h.Kind != "":
			// An item of a typed list: the list gave it its kind.
		case !ok && f == "apiVersion" && h.APIVersion != "":
		case !ok, string(v) == "null":
			return fail(f, "required")
		case json.Unmarshal(v, &str) != nil:
			return fail(f, "expected a string, got "+jsonKind(v))
		case str == "":
			return fail(f, "required")
		}
	}
	group, _ := splitAPIVersion(h.APIVersion)
	if (group == v1.Group || group == v1.AWSGroup) && !isKarpenterKind(h.Kind) && !isKarpenterKind(strings.TrimSuffix(h.Kind, "List")) {
		return fail("kind", fmt.Sprintf("%q is not a kind of %s (want NodePool, NodeClaim or EC2NodeClass; kinds are case-sensitive)", h.Kind, group))
	}
	return nil
}

func isKarpenterKind(kind string) bool {
	return kind == v1.KindNodePool || kind == v1.KindNodeClaim || kind == v1.KindEC2NodeClass
}

// newCoreObject returns a pointer to a zero value of the Kubernetes type for
// (group, version, kind), or nil for kinds nodewright does not read.
func newCoreObject(group, version, kind string) any {
	switch group + "/" + version + "/" + kind {
	case "/v1/Pod":
		return &corev1.Pod{}
	case "/v1/Node":
		return &corev1.Node{}
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}
	case "apps/v1/ReplicaSet":
		return &appsv1.ReplicaSet{}
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}
	case "batch/v1/Job":
		return &batchv1.Job{}
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "/v1/PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "/v1/PersistentVolume":
		return &corev1.PersistentVolume{}
	case "storage.k8s.io/v1/StorageClass":
		return &storagev1.StorageClass{}
	case "storage.k8s.io/v1/CSINode":
		return &storagev1.CSINode{}
	}
	return nil
}

// splitAPIVersion splits "group/version"; the core group is "".
func splitAPIVersion(apiVersion string) (group, version string) {
	if g, v, ok := strings.Cut(apiVersion, "/"); ok {
		return g, v
	}
	return "", apiVersion
}
