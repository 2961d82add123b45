package scheduling

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/shared/requirements"
)

// podInfo is one pending pod.
type podInfo struct {
	idx  int32
	pod  *corev1.Pod
	key  string
	req  vec
	cls  *class
	eff  *effClass
	host *host
	rec  []recEntry
	// ignored is set when the provisioner does not act on the pod at all.
	ignored string
}

// class groups pending pods whose scheduling constraints are identical
// (namespace, labels, node selection, affinity, tolerations, spread, host
// ports); requests may differ. Compatibility with pools and topology terms
// are computed once per class and relaxation level.
type class struct {
	id    int
	rep   *corev1.Pod
	ports []hostPort
	// vol are the node requirements the pods' volumes add (volumes.go):
	// part of every level's requirements, never relaxed, and not part of
	// topology spread's domain eligibility (karpenter-spec section 3).
	vol        []corev1.NodeSelectorRequirement
	selectedBy []*group
	inverse    []*group
	levels     []*effClass
}

// effClass is a class at one relaxation level (karpenter: preferences.go):
// level 0 treats every preference as required; each further level drops
// one preference in Karpenter's order.
type effClass struct {
	cls   *class
	level int
	pod   *corev1.Pod
	reqID int32
	// spreadReqID is reqID without the volume requirements: what topology
	// spread's nodeAffinityPolicy Honor reads. Equal to reqID for pods
	// without volume requirements.
	spreadReqID int32
	tols        []corev1.Toleration
	owned       []owned
	// relaxed says what the step into this level dropped ("" at level 0).
	relaxed string
	pools   []poolFit
}

// poolFit caches whether a class level can use a pool at all.
type poolFit struct {
	done   bool
	reqID  int32 // merged requirement set; -1 when incompatible
	reason string
}

// classKey renders everything that decides where a pod may go, except its
// requests, as a compact deterministic string.
func classKey(p *corev1.Pod) string {
	var b strings.Builder
	w := func(parts ...string) {
		for _, s := range parts {
			b.WriteString(s)
			b.WriteByte(0)
		}
	}
	w("ns", p.Namespace)
	for _, k := range sortedKeys(p.Labels) {
		w("l", k, p.Labels[k])
	}
	for _, k := range sortedKeys(p.Spec.NodeSelector) {
		w("s", k, p.Spec.NodeSelector[k])
	}
	for _, t := range p.Spec.Tolerations {
		sec := ""
		if t.TolerationSeconds != nil {
			sec = strconv.FormatInt(*t.TolerationSeconds, 10)
		}
		w("t", t.Key, string(t.Operator), t.Value, string(t.Effect), sec)
	}
	for _, c := range p.Spec.TopologySpreadConstraints {
		md := ""
		if c.MinDomains != nil {
			md = strconv.Itoa(int(*c.MinDomains))
		}
		nap, ntp := "", ""
		if c.NodeAffinityPolicy != nil {
			nap = string(*c.NodeAffinityPolicy)
		}
		if c.NodeTaintsPolicy != nil {
			ntp = string(*c.NodeTaintsPolicy)
		}
		w("c", strconv.Itoa(int(c.MaxSkew)), c.TopologyKey, string(c.WhenUnsatisfiable), md, nap, ntp, strings.Join(c.MatchLabelKeys, ","))
		writeSelector(w, c.LabelSelector)
	}
	if a := p.Spec.Affinity; a != nil {
		if na := a.NodeAffinity; na != nil {
			if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
				for _, t := range r.NodeSelectorTerms {
					w("nr")
					writeTerm(w, t)
				}
			}
			for _, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
				w("np", strconv.Itoa(int(t.Weight)))
				writeTerm(w, t.Preference)
			}
		}
		if pa := a.PodAffinity; pa != nil {
			for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				w("ar")
				writePodTerm(w, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
			for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				w("ap", strconv.Itoa(int(pa.PreferredDuringSchedulingIgnoredDuringExecution[i].Weight)))
				writePodTerm(w, &pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
			}
		}
		if pa := a.PodAntiAffinity; pa != nil {
			for i := range pa.RequiredDuringSchedulingIgnoredDuringExecution {
				w("xr")
				writePodTerm(w, &pa.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
			for i := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				w("xp", strconv.Itoa(int(pa.PreferredDuringSchedulingIgnoredDuringExecution[i].Weight)))
				writePodTerm(w, &pa.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
			}
		}
	}
	for _, hp := range podHostPorts(&p.Spec) {
		w("h", hp.String())
	}
	return b.String()
}

func writeTerm(w func(...string), t corev1.NodeSelectorTerm) {
	for _, e := range t.MatchExpressions {
		w(append([]string{"e", e.Key, string(e.Operator)}, e.Values...)...)
	}
	for _, e := range t.MatchFields {
		w(append([]string{"f", e.Key, string(e.Operator)}, e.Values...)...)
	}
	w("/")
}

func writeSelector(w func(...string), ls *metav1.LabelSelector) {
	if ls == nil {
		w("nil")
		return
	}
	for _, k := range sortedKeys(ls.MatchLabels) {
		w("ml", k, ls.MatchLabels[k])
	}
	for _, e := range ls.MatchExpressions {
		w(append([]string{"me", e.Key, string(e.Operator)}, e.Values...)...)
	}
	w("/")
}

func writePodTerm(w func(...string), t *corev1.PodAffinityTerm) {
	w(t.TopologyKey, strings.Join(t.Namespaces, ","), strings.Join(t.MatchLabelKeys, ","), strings.Join(t.MismatchLabelKeys, ","))
	writeSelector(w, t.LabelSelector)
	if t.NamespaceSelector != nil {
		w("nss")
		writeSelector(w, t.NamespaceSelector)
	}
}

// notPending returns why a pod is not pending work for the provisioner, or
// "": pods already bound, terminal or terminating, DaemonSet-owned and
// mirror pods (karpenter: pkg/utils/pod IsProvisionable), and pods with
// resource claims (IGNORE_DRA_REQUESTS default).
func notPending(p *corev1.Pod) string {
	switch {
	case p.Spec.NodeName != "":
		return fmt.Sprintf("not pending: already bound to node %q", p.Spec.NodeName)
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return fmt.Sprintf("not pending: pod phase is %s", p.Status.Phase)
	case p.DeletionTimestamp != nil:
		return "not pending: pod is being deleted"
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return fmt.Sprintf("not provisioned for: owned by DaemonSet %q (daemon pods run on every compatible node and never cause a launch)", o.Name)
		}
	}
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return "not provisioned for: static (mirror) pod"
	}
	if len(p.Spec.ResourceClaims) > 0 {
		return "not provisioned for: pod requests dynamic resources (resource claims), which the provisioner ignores"
	}
	return ""
}

// invalidForProvisioner returns why Karpenter's validation ignores a pod,
// or "" (karpenter: provisioner.go Validate): matchFields, restricted keys,
// unsupported operators or values, karpenter.sh/nodepool DoesNotExist.
func invalidForProvisioner(p *corev1.Pod) string {
	if why := invalidTopologyTerms(p); why != "" {
		return "invalid pod spec (the API server rejects it): " + why
	}
	err := requirements.ValidatePod(p)
	if err == nil {
		return ""
	}
	if errors.Is(err, requirements.ErrNodePoolDoesNotExist) {
		return "not provisioned for: pod requires karpenter.sh/nodepool DoesNotExist, so it opts out of provisioned nodes"
	}
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return "ignored by the provisioner (invalid node selection): " + msg
}

// relax returns a copy of pod with one more preference dropped, in
// Karpenter's order, and what was dropped; ok is false when nothing is left
// to relax (karpenter: preferences.go Relax; karpenter-spec §2):
// (1) the first required node-affinity term when there are several, (2) the
// heaviest preferred pod-affinity term, (3) the heaviest preferred
// pod-anti-affinity term, (4) the heaviest preferred node-affinity term,
// (5) one ScheduleAnyway topology spread constraint, (6) when some NodePool
// has a PreferNoSchedule taint, a toleration for every PreferNoSchedule
// taint.
func relax(pod *corev1.Pod, preferNoSchedule bool) (*corev1.Pod, string, bool) {
	p := pod.DeepCopy()
	a := p.Spec.Affinity
	if a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil && len(r.NodeSelectorTerms) > 1 {
			r.NodeSelectorTerms = r.NodeSelectorTerms[1:]
			return p, "dropped the first required node-affinity term", true
		}
	}
	if a != nil && a.PodAffinity != nil && len(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		terms := a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		sort.SliceStable(terms, func(i, j int) bool { return terms[i].Weight > terms[j].Weight })
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = terms[1:]
		return p, "dropped the heaviest preferred pod-affinity term", true
	}
	if a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		terms := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		sort.SliceStable(terms, func(i, j int) bool { return terms[i].Weight > terms[j].Weight })
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = terms[1:]
		return p, "dropped the heaviest preferred pod-anti-affinity term", true
	}
	if a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		terms := a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		sort.SliceStable(terms, func(i, j int) bool { return terms[i].Weight > terms[j].Weight })
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = terms[1:]
		return p, "dropped the heaviest preferred node-affinity term", true
	}
	for i, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway {
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints[:i:i], p.Spec.TopologySpreadConstraints[i+1:]...)
			return p, "dropped a ScheduleAnyway topology spread constraint", true
		}
	}
	if preferNoSchedule {
		for _, t := range p.Spec.Tolerations {
			if t.Operator == corev1.TolerationOpExists && t.Key == "" && t.Effect == corev1.TaintEffectPreferNoSchedule {
				return nil, "", false
			}
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, preferNoScheduleToleration)
		return p, "tolerated PreferNoSchedule taints", true
	}
	return nil, "", false
}

// ignorePreferences drops every preference up front (PreferencePolicy
// Ignore): preferred node affinity, preferred pod (anti-)affinity and
// ScheduleAnyway spread constraints.
func ignorePreferences(pod *corev1.Pod) *corev1.Pod {
	p := pod.DeepCopy()
	if a := p.Spec.Affinity; a != nil {
		if a.NodeAffinity != nil {
			a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = nil
		}
		if a.PodAffinity != nil {
			a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = nil
		}
		if a.PodAntiAffinity != nil {
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = nil
		}
	}
	var tscs []corev1.TopologySpreadConstraint
	for _, c := range p.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			tscs = append(tscs, c)
		}
	}
	p.Spec.TopologySpreadConstraints = tscs
	return p
}

// buildClass computes every relaxation level of a class up front, so that
// all topology groups exist before existing pods are counted.
func (s *solver) buildClass(c *class) {
	pod := c.rep
	if s.ignorePrefs {
		pod = ignorePreferences(pod)
	}
	relaxed := ""
	for level := 0; ; level++ {
		e := &effClass{cls: c, level: level, pod: pod, relaxed: relaxed, pools: make([]poolFit, len(s.pools))}
		podReqs := requirements.ForPod(pod, true)
		e.spreadReqID = s.reqs.intern(podReqs)
		e.reqID = e.spreadReqID
		if len(c.vol) > 0 {
			r := podReqs.Clone()
			for _, v := range c.vol {
				r.Add(requirements.New(v.Key, v.Operator, v.Values...))
			}
			e.reqID = s.reqs.intern(r)
		}
		e.tols = pod.Spec.Tolerations
		e.owned = s.ownedGroups(pod)
		c.levels = append(c.levels, e)
		next, what, ok := relax(pod, s.anyPreferNoSchedule)
		if !ok || level > 1000 {
			return
		}
		pod, relaxed = next, what
	}
}

// finishClass resolves selections and spread eligibility once every group
// exists and the domain universe is known.
func (s *solver) finishClass(c *class) {
	c.selectedBy = s.selectedBy(c.rep.Namespace, c.rep.Labels)
	for _, g := range c.selectedBy {
		if g.kind == gAnti {
			c.inverse = append(c.inverse, g)
		}
	}
	sel := map[int32]bool{}
	for _, g := range c.selectedBy {
		sel[g.id] = true
	}
	for _, e := range c.levels {
		podReqs := s.reqs.get(e.spreadReqID)
		for i := range e.owned {
			o := &e.owned[i]
			o.self = sel[o.g.id]
			if o.g.kind == gSpread {
				o.eligible = s.eligibleDomains(o, e.reqID, podReqs, e.tols)
			}
		}
	}
}

// isolated reports whether pods of this class level need a host each: they
// own a hostname anti-affinity term that selects them.
func (e *effClass) isolated() bool {
	for i := range e.owned {
		o := &e.owned[i]
		if o.g.kind == gAnti && o.g.key.hostname && o.self {
			return true
		}
	}
	return false
}

// invalidTopologyTerms returns the first topology field of p that the API
// server's pod validation rejects (k8s.io/kubernetes pkg/apis/core/validation:
// validateTopologySpreadConstraints, validatePodAffinityTerm): a spread
// constraint's maxSkew below 1, an empty topologyKey, whenUnsatisfiable
// other than DoNotSchedule or ScheduleAnyway, minDomains below 1, or a pod
// (anti-)affinity term with an empty topologyKey; "" when all are valid.
func invalidTopologyTerms(p *corev1.Pod) string {
	for i, c := range p.Spec.TopologySpreadConstraints {
		field := fmt.Sprintf("topologySpreadConstraints[%d]", i)
		switch {
		case c.MaxSkew < 1:
			return fmt.Sprintf("%s.maxSkew %d: must be at least 1", field, c.MaxSkew)
		case c.TopologyKey == "":
			return field + ".topologyKey: required"
		case c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway:
			return fmt.Sprintf("%s.whenUnsatisfiable %q: want DoNotSchedule or ScheduleAnyway", field, c.WhenUnsatisfiable)
		case c.MinDomains != nil && *c.MinDomains < 1:
			return fmt.Sprintf("%s.minDomains %d: must be at least 1", field, *c.MinDomains)
		}
	}
	a := p.Spec.Affinity
	if a == nil {
		return ""
	}
	check := func(field string, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) string {
		for i, t := range required {
			if t.TopologyKey == "" {
				return fmt.Sprintf("%s.requiredDuringSchedulingIgnoredDuringExecution[%d].topologyKey: required", field, i)
			}
		}
		for i, t := range preferred {
			if t.PodAffinityTerm.TopologyKey == "" {
				return fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm.topologyKey: required", field, i)
			}
		}
		return ""
	}
	if pa := a.PodAffinity; pa != nil {
		if why := check("affinity.podAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution); why != "" {
			return why
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		return check("affinity.podAntiAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
	}
	return ""
}
