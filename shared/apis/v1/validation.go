package v1

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Patterns of the Karpenter v1.14.1 CRDs (karpenter: pkg/apis/v1/nodepool.go,
// nodeclaim.go, duration.go).
var (
	// expireAfter and consolidateAfter.
	nillableDurationPattern = regexp.MustCompile(`^(([0-9]+(s|m|h))+|Never)$`)
	// terminationGracePeriod.
	durationPattern = regexp.MustCompile(`^([0-9]+(s|m|h))+$`)
	// budgets[].nodes.
	budgetNodesPattern = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)
	// budgets[].duration.
	budgetDurationPattern = regexp.MustCompile(`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`)
	// budgets[].schedule, as written in the CRD (only the first alternative
	// is anchored at the start and only the second at the end).
	budgetSchedulePattern = regexp.MustCompile(`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`)
	// nodeClassRef.group.
	nodeClassGroupPattern = regexp.MustCompile(`^[^/]*$`)
)

// Limits of the Karpenter v1.14.1 CRDs.
const (
	maxRequirements      = 100
	maxRequirementKeyLen = 316
	minMinValues         = 1
	maxMinValues         = 50
	maxBudgets           = 50
	maxBudgetReasons     = 50
	minWeight            = 1
	maxWeight            = 100
)

// SupportedOperators are the requirement operators Karpenter accepts, in the
// order error messages list them.
var SupportedOperators = []corev1.NodeSelectorOperator{
	corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn, corev1.NodeSelectorOpExists,
	corev1.NodeSelectorOpDoesNotExist, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt,
	NodeSelectorOpGte, NodeSelectorOpLte,
}

var (
	consolidationPolicies = []string{string(ConsolidationPolicyWhenEmpty), string(ConsolidationPolicyWhenEmptyOrUnderutilized), string(ConsolidationPolicyBalanced)}
	disruptionReasons     = []string{string(DisruptionReasonUnderutilized), string(DisruptionReasonEmpty), string(DisruptionReasonDrifted)}
	taintEffects          = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}
	capacityTypes         = []string{CapacityTypeOnDemand, CapacityTypeSpot, CapacityTypeReserved}
)

// headOnlyLabels are well-known labels newer than Karpenter v1.14.1: accepted
// with a warning.
var headOnlyLabels = map[string]bool{LabelNitroSandbox: true}

// Validate checks the NodePool against the rules of Karpenter v1.14.1's
// NodePool CRD (OpenAPI patterns, enums, bounds and CEL rules) and its
// runtime validation (karpenter: pkg/apis/v1/nodepool_validation.go), in our
// own words. It returns nil, or a *ValidationError listing every problem with
// its field path and what would be valid. Call SetDefaults first: Validate
// checks the object as Karpenter's API server stores it. It never panics.
func (np *NodePool) Validate() error {
	var errs fieldErrors
	validateName(&errs, np.Name)
	t := np.Spec.Template
	validateLabels(&errs, "spec.template.metadata.labels", t.ObjectMeta.Labels, true)
	validateTemplateAnnotations(&errs, "spec.template.metadata.annotations", t.ObjectMeta.Annotations)
	validateTemplateSpec(&errs, "spec.template.spec", t.Spec.Requirements, t.Spec.Taints, t.Spec.StartupTaints,
		t.Spec.NodeClassRef, t.Spec.TerminationGracePeriod, t.Spec.ExpireAfter, true)
	validateDisruption(&errs, "spec.disruption", np.Spec.Disruption)
	validateWeightAndReplicas(&errs, np.Spec)
	return errs.result(KindNodePool, np.Name)
}

// Warnings lists what Validate tolerates but nodewright does not act on, or
// what Karpenter would accept yet never use: well-known labels newer than
// v1.14.1, requirement values ignored by their operator, a nodeClassRef to
// something other than an EC2NodeClass, and the alpha replicas field.
func (np *NodePool) Warnings() []FieldError {
	var warns fieldErrors
	t := np.Spec.Template
	for _, k := range sortedKeys(t.ObjectMeta.Labels) {
		if headOnlyLabels[k] {
			warns.add(key("spec.template.metadata.labels", k), "label is newer than Karpenter v1.14.1; accepted")
		}
	}
	requirementWarnings(&warns, "spec.template.spec.requirements", t.Spec.Requirements)
	if ref := t.Spec.NodeClassRef; ref != nil && ref.Group != "" && ref.Kind != "" &&
		(ref.Group != AWSGroup || ref.Kind != KindEC2NodeClass) {
		warns.add("spec.template.spec.nodeClassRef", "%s/%s is not an EC2NodeClass (karpenter.k8s.aws); the pool can never become ready", ref.Group, ref.Kind)
	}
	if np.Spec.Replicas != nil {
		warns.add("spec.replicas", "static NodePools are alpha (Karpenter feature gate StaticCapacity, off by default)")
	}
	return warns
}

// Validate checks the NodeClaim against Karpenter v1.14.1's NodeClaim CRD and
// runtime rules: requirements, taints, nodeClassRef, expireAfter and
// terminationGracePeriod, with the same contract as NodePool.Validate.
// Unlike a NodePool, a NodeClaim may carry the karpenter.sh/nodepool
// requirement (Karpenter writes it).
func (nc *NodeClaim) Validate() error {
	var errs fieldErrors
	validateName(&errs, nc.Name)
	s := nc.Spec
	validateTemplateSpec(&errs, "spec", s.Requirements, s.Taints, s.StartupTaints, s.NodeClassRef,
		s.TerminationGracePeriod, s.ExpireAfter, false)
	return errs.result(KindNodeClaim, nc.Name)
}

// Warnings lists what NodeClaim.Validate tolerates: labels newer than
// v1.14.1 and requirement values ignored by their operator.
func (nc *NodeClaim) Warnings() []FieldError {
	var warns fieldErrors
	requirementWarnings(&warns, "spec.requirements", nc.Spec.Requirements)
	return warns
}

func validateName(errs *fieldErrors, name string) {
	if name == "" {
		errs.add("metadata.name", "required")
		return
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs.add("metadata.name", "%s", msg)
	}
}

// validateTemplateSpec checks what a NodePool template and a NodeClaim
// share. forPool adds the rules only a NodePool has (no karpenter.sh/nodepool
// requirement).
func validateTemplateSpec(errs *fieldErrors, path string, reqs []NodeSelectorRequirementWithMinValues,
	taints, startupTaints []corev1.Taint, ref *NodeClassReference, tgp *Duration, expireAfter NillableDuration, forPool bool) {
	validateRequirements(errs, child(path, "requirements"), reqs, forPool)
	seen := map[string]string{}
	validateTaints(errs, child(path, "taints"), taints, seen)
	validateTaints(errs, child(path, "startupTaints"), startupTaints, seen)
	validateNodeClassRef(errs, child(path, "nodeClassRef"), ref)
	if tgp != nil && !durationPattern.MatchString(tgp.Raw) && tgp.Raw != "" {
		errs.add(child(path, "terminationGracePeriod"), "%q is not a duration of whole hours, minutes and seconds such as \"48h\" or \"1h30m\"", tgp.Raw)
	}
	validateNillableDuration(errs, child(path, "expireAfter"), expireAfter)
}

func validateNillableDuration(errs *fieldErrors, path string, d NillableDuration) {
	if !d.IsSet() {
		return
	}
	raw := d.Raw
	if raw == "" && d.Duration != nil {
		return // built in code
	}
	if !nillableDurationPattern.MatchString(raw) {
		errs.add(path, "%q is not \"Never\" or a duration of whole hours, minutes and seconds such as \"720h\" or \"1h30m\"", raw)
	}
}

func validateRequirements(errs *fieldErrors, path string, reqs []NodeSelectorRequirementWithMinValues, forPool bool) {
	if reqs == nil {
		errs.add(path, "required")
		return
	}
	if len(reqs) > maxRequirements {
		errs.add(path, "has %d entries, at most %d are allowed", len(reqs), maxRequirements)
	}
	for i, r := range reqs {
		validateRequirement(errs, index(path, i), r, forPool)
	}
}

func validateRequirement(errs *fieldErrors, path string, r NodeSelectorRequirementWithMinValues, forPool bool) {
	k := r.Key
	if n, ok := NormalizedLabels[k]; ok {
		k = n
	}
	keyPath := child(path, "key")
	switch {
	case r.Key == "":
		errs.add(keyPath, "required")
	case len(r.Key) > maxRequirementKeyLen:
		errs.add(keyPath, "is %d characters long, at most %d are allowed", len(r.Key), maxRequirementKeyLen)
	default:
		for _, msg := range validation.IsQualifiedName(r.Key) {
			errs.add(keyPath, "%q is not a valid label key: %s", r.Key, msg)
		}
		if forPool && k == LabelNodePool {
			errs.add(keyPath, "label %q is restricted; Karpenter sets it", LabelNodePool)
		} else if msg := restrictedLabel(k); msg != "" {
			errs.add(keyPath, "%s", msg)
		}
	}
	opPath := child(path, "operator")
	if r.Operator == "" {
		errs.add(opPath, "required; one of %s", joinOps())
	} else if !slices.Contains(SupportedOperators, r.Operator) {
		errs.add(opPath, "%q is not one of %s", r.Operator, joinOps())
	}
	valuesPath := child(path, "values")
	for i, v := range r.Values {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs.add(index(valuesPath, i), "%q is not a valid label value: %s", v, msg)
		}
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		if len(r.Values) == 0 {
			errs.add(valuesPath, "operator In needs at least one value")
		}
		if k == corev1.LabelTopologyZone {
			validateZonesOneRegion(errs, valuesPath, r.Values)
		}
		if k == LabelCapacityType && len(r.Values) > 0 && !slices.ContainsFunc(r.Values, func(v string) bool { return slices.Contains(capacityTypes, v) }) {
			errs.add(valuesPath, "none of %s is a capacity type; use at least one of %s", quoteAll(r.Values), strings.Join(capacityTypes, ", "))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, NodeSelectorOpGte, NodeSelectorOpLte:
		if len(r.Values) != 1 {
			errs.add(valuesPath, "operator %s needs exactly one value, got %d", r.Operator, len(r.Values))
		} else if n, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil || n < 0 {
			errs.add(index(valuesPath, 0), "operator %s needs a non-negative integer, got %q", r.Operator, r.Values[0])
		}
	}
	if r.MinValues != nil {
		mv := *r.MinValues
		mvPath := child(path, "minValues")
		switch {
		case mv < minMinValues || mv > maxMinValues:
			errs.add(mvPath, "%d is out of range %d..%d", mv, minMinValues, maxMinValues)
		case r.Operator == corev1.NodeSelectorOpIn && len(r.Values) < mv:
			errs.add(mvPath, "%d is more than the %d values listed; operator In needs at least minValues values", mv, len(r.Values))
		}
	}
}

// validateZonesOneRegion refuses zone values of more than one region: a
// cluster's nodes are all in its region, so such a requirement names zones
// no node can ever be in (plan and disruption would also have to guess the
// region). Values that are not AWS zone names are left to offering
// resolution.
func validateZonesOneRegion(errs *fieldErrors, path string, zones []string) {
	first, firstZone := "", ""
	for i, z := range zones {
		r, ok := RegionOfZone(z)
		if !ok {
			continue
		}
		if first == "" {
			first, firstZone = r, z
			continue
		}
		if r != first {
			errs.add(index(path, i), "zone %q is in region %s but zone %q is in %s; a NodePool's zones must be in the cluster's one region", z, r, firstZone, first)
			return
		}
	}
}

func requirementWarnings(warns *fieldErrors, path string, reqs []NodeSelectorRequirementWithMinValues) {
	for i, r := range reqs {
		p := index(path, i)
		if headOnlyLabels[r.Key] {
			warns.add(child(p, "key"), "label is newer than Karpenter v1.14.1; accepted")
		}
		if (r.Operator == corev1.NodeSelectorOpExists || r.Operator == corev1.NodeSelectorOpDoesNotExist) && len(r.Values) > 0 {
			warns.add(child(p, "values"), "ignored with operator %s", r.Operator)
		}
	}
}

func joinOps() string {
	names := make([]string, len(SupportedOperators))
	for i, op := range SupportedOperators {
		names[i] = string(op)
	}
	return strings.Join(names, ", ")
}

func quoteAll(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// labelDomain returns the prefix of a label key before "/", or "".
func labelDomain(k string) string {
	if d, _, ok := strings.Cut(k, "/"); ok {
		return d
	}
	return ""
}

// restrictedLabel explains why a NodePool may not set label key k, or
// returns "" when it may. It follows Karpenter's IsRestrictedLabel and the
// CRD's label-domain rules: kubernetes.io/hostname is restricted; well-known
// labels are allowed; otherwise a key whose domain ends in a restricted
// domain is refused unless the domain ends in an exception. Labels newer than
// v1.14.1 (headOnlyLabels) are allowed.
func restrictedLabel(k string) string {
	if k == LabelHostname {
		return fmt.Sprintf("label %q is restricted; Karpenter sets it per node", LabelHostname)
	}
	if WellKnownLabels[k] || headOnlyLabels[k] {
		return ""
	}
	domain := labelDomain(k)
	for _, ex := range LabelDomainExceptions {
		if strings.HasSuffix(domain, ex) {
			return ""
		}
	}
	for _, d := range RestrictedLabelDomains {
		if strings.HasSuffix(domain, d) {
			return fmt.Sprintf("label domain %q is restricted; use a well-known label or a key in a domain of your own", d)
		}
	}
	return ""
}

// NodewrightDomain prefixes the annotations nodewright writes on its
// NodeClaims (AnnotationAdoptedFrom among them). A NodePool template may not
// carry one: its annotations are copied onto every NodeClaim launched from
// it, and one such as nodewright.dev/adopted-from would forge what only
// nodewright decides.
const NodewrightDomain = "nodewright.dev/"

func validateTemplateAnnotations(errs *fieldErrors, path string, annotations map[string]string) {
	for _, k := range sortedKeys(annotations) {
		if strings.HasPrefix(k, NodewrightDomain) {
			errs.add(key(path, k), "annotations under %s are nodewright's own and may not be set in a NodePool template", NodewrightDomain)
		}
	}
}

func validateLabels(errs *fieldErrors, path string, labels map[string]string, forPool bool) {
	for _, k := range sortedKeys(labels) {
		p := key(path, k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs.add(p, "%q is not a valid label key: %s", k, msg)
		}
		if forPool && k == LabelNodePool {
			errs.add(p, "label %q is restricted; Karpenter sets it", LabelNodePool)
		} else if msg := restrictedLabel(k); msg != "" {
			errs.add(p, "%s", msg)
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs.add(p, "%q is not a valid label value: %s", labels[k], msg)
		}
	}
}

// validateTaints checks taints; seen (key/effect → path) is shared between
// taints and startupTaints so that a duplicate across both is caught.
func validateTaints(errs *fieldErrors, path string, taints []corev1.Taint, seen map[string]string) {
	for i, t := range taints {
		p := index(path, i)
		if t.Key == "" {
			errs.add(child(p, "key"), "required")
		} else {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs.add(child(p, "key"), "%q is not a valid taint key: %s", t.Key, msg)
			}
		}
		if t.Value != "" {
			for _, msg := range validation.IsQualifiedName(t.Value) {
				errs.add(child(p, "value"), "%q is not a valid taint value: %s", t.Value, msg)
			}
		}
		switch {
		case t.Effect == "":
			errs.add(child(p, "effect"), "required; one of %s", strings.Join(taintEffects, ", "))
		case !slices.Contains(taintEffects, string(t.Effect)):
			errs.add(child(p, "effect"), "%q is not one of %s", t.Effect, strings.Join(taintEffects, ", "))
		}
		id := t.Key + ":" + string(t.Effect)
		if prev, dup := seen[id]; dup {
			errs.add(p, "duplicates %s (same key %q and effect %s)", prev, t.Key, t.Effect)
		} else {
			seen[id] = p
		}
	}
}

func validateNodeClassRef(errs *fieldErrors, path string, ref *NodeClassReference) {
	if ref == nil {
		errs.add(path, "required")
		return
	}
	if ref.Group == "" {
		errs.add(child(path, "group"), "required (karpenter.k8s.aws for an EC2NodeClass)")
	} else if !nodeClassGroupPattern.MatchString(ref.Group) {
		errs.add(child(path, "group"), "%q must be an API group without a version, such as %q", ref.Group, AWSGroup)
	}
	if ref.Kind == "" {
		errs.add(child(path, "kind"), "required (EC2NodeClass)")
	}
	if ref.Name == "" {
		errs.add(child(path, "name"), "required: the name of the EC2NodeClass")
	}
}

func validateDisruption(errs *fieldErrors, path string, d Disruption) {
	validateNillableDuration(errs, child(path, "consolidateAfter"), d.ConsolidateAfter)
	if d.ConsolidationPolicy != "" && !slices.Contains(consolidationPolicies, string(d.ConsolidationPolicy)) {
		errs.add(child(path, "consolidationPolicy"), "%q is not one of %s", d.ConsolidationPolicy, strings.Join(consolidationPolicies, ", "))
	}
	bp := child(path, "budgets")
	if len(d.Budgets) > maxBudgets {
		errs.add(bp, "has %d entries, at most %d are allowed", len(d.Budgets), maxBudgets)
	}
	for i, b := range d.Budgets {
		validateBudget(errs, index(bp, i), b)
	}
}

func validateBudget(errs *fieldErrors, path string, b Budget) {
	if !budgetNodesPattern.MatchString(b.Nodes) {
		errs.add(child(path, "nodes"), "%q is not a node count (\"5\") or a percentage from 0%% to 100%% (\"10%%\")", b.Nodes)
	}
	if len(b.Reasons) > maxBudgetReasons {
		errs.add(child(path, "reasons"), "has %d entries, at most %d are allowed", len(b.Reasons), maxBudgetReasons)
	}
	for i, r := range b.Reasons {
		if !slices.Contains(disruptionReasons, string(r)) {
			errs.add(index(child(path, "reasons"), i), "%q is not one of %s", r, strings.Join(disruptionReasons, ", "))
		}
	}
	if b.Schedule != nil {
		s := *b.Schedule
		if !budgetSchedulePattern.MatchString(s) {
			errs.add(child(path, "schedule"), "%q is not a cron schedule (\"0 9 * * mon-fri\") or an @ shorthand (\"@daily\")", s)
		} else if _, err := ParseBudgetSchedule(s); err != nil {
			errs.add(child(path, "schedule"), "%q is not a valid cron schedule: %v", s, err)
		}
		if b.Duration == nil {
			errs.add(child(path, "duration"), "required when schedule is set")
		}
	}
	if b.Duration != nil {
		if b.Duration.Raw != "" && !budgetDurationPattern.MatchString(b.Duration.Raw) {
			errs.add(child(path, "duration"), "%q is not a duration in whole hours and minutes such as \"8h\", \"30m\" or \"1h30m\"", b.Duration.Raw)
		}
		if b.Schedule == nil {
			errs.add(child(path, "schedule"), "required when duration is set")
		}
	}
}

func validateWeightAndReplicas(errs *fieldErrors, s NodePoolSpec) {
	if s.Weight != nil && (*s.Weight < minWeight || *s.Weight > maxWeight) {
		errs.add("spec.weight", "%d is out of range %d..%d", *s.Weight, minWeight, maxWeight)
	}
	if s.Replicas == nil {
		return
	}
	if *s.Replicas < 0 {
		errs.add("spec.replicas", "%d is negative", *s.Replicas)
	}
	if s.Weight != nil {
		errs.add("spec.weight", "cannot be set together with replicas (a static NodePool)")
	}
	for _, name := range sortedKeys(s.Limits) {
		if name != "nodes" {
			errs.add(key("spec.limits", string(name)), "only the \"nodes\" limit is allowed together with replicas")
		}
	}
}
