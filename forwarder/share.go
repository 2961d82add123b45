package main

import (
	"encoding/json"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxSharedParts bounds each of a podParts' tables: past it the table
// starts again empty. Pods already trimmed keep what they share; pods of
// workloads seen before then get one new copy between them.
const maxSharedParts = 4096

// podParts lets trimmed pods share the parts the pods of one workload have
// in common: the labels, annotations and owner references (one table), the
// pod spec without its node name (another), and the strings of namespaces
// and node names. The pods of a ReplicaSet, a StatefulSet without volumes
// or a DaemonSet then cost little more than their own fields (name, UID,
// resource version, node, phase, conditions): BenchmarkPodCache measures the
// bytes a cached pod holds. Sharing is safe because an informer's objects
// are read-only to everything that reads the cache (client-go's contract
// for listers and event handlers); parts are matched by their JSON
// encoding, so equal parts are shared and different ones never are.
type podParts struct {
	mu      sync.Mutex
	meta    map[string]sharedMeta
	specs   map[string]*corev1.PodSpec
	strings map[string]string
}

// sharedMeta is the part of a pod's metadata its workload's pods share.
type sharedMeta struct {
	Labels          map[string]string       `json:"l,omitempty"`
	Annotations     map[string]string       `json:"a,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"o,omitempty"`
}

func newPodParts() *podParts {
	return &podParts{meta: map[string]sharedMeta{}, specs: map[string]*corev1.PodSpec{}, strings: map[string]string{}}
}

// share replaces t's labels, annotations, owner references, spec fields
// (all but the node name) and namespace and node name strings with equal
// ones another trimmed pod already holds, and records t's for the next
// pods. t must be a pod trim made, referenced by nothing else yet.
func (s *podParts) share(t *corev1.Pod) {
	m := sharedMeta{Labels: t.Labels, Annotations: t.Annotations, OwnerReferences: t.OwnerReferences}
	metaKey, err := json.Marshal(m)
	if err != nil {
		return // not shared: the pod keeps its own copy
	}
	spec := t.Spec
	spec.NodeName = ""
	specKey, err := json.Marshal(&spec)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, ok := s.meta[string(metaKey)]; ok {
		m = got
	} else {
		s.meta = room(s.meta)
		s.meta[string(metaKey)] = m
	}
	t.Labels, t.Annotations, t.OwnerReferences = m.Labels, m.Annotations, m.OwnerReferences
	shared, ok := s.specs[string(specKey)]
	if !ok {
		s.specs = room(s.specs)
		shared = &spec
		s.specs[string(specKey)] = shared
	}
	nodeName := t.Spec.NodeName
	t.Spec = *shared
	t.Spec.NodeName = s.intern(nodeName)
	t.Namespace = s.intern(t.Namespace)
}

// intern returns the string equal to v the table holds, adding v.
func (s *podParts) intern(v string) string {
	if v == "" {
		return v
	}
	if got, ok := s.strings[v]; ok {
		return got
	}
	s.strings = room(s.strings)
	s.strings[v] = v
	return v
}

// room returns m, or an empty map once m holds maxSharedParts entries.
func room[V any](m map[string]V) map[string]V {
	if len(m) >= maxSharedParts {
		return map[string]V{}
	}
	return m
}
