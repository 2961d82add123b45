package provisioning

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// knownEphemeralTaints are the taints a new Node carries for a while; a
// NodeClaim is not Initialized while its Node has any of them (karpenter:
// pkg/scheduling/taints.go KnownEphemeralTaints; compared by key and
// effect).
var knownEphemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	unregisteredTaint,
}

// unregisteredTaint is injected into every node's kubelet registration and
// removed at registration (karpenter-spec section 1.5).
var unregisteredTaint = corev1.Taint{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute}

// NodePatch is a change to one Node, as data: the kube adapter reads the
// Node, applies the patch with Apply and updates the Node with the
// resourceVersion it read (so a concurrent change makes it re-read and
// re-apply rather than overwrite). Applying a patch twice is the same as
// applying it once.
type NodePatch struct {
	// Node is the Node's name.
	Node string `json:"node"`
	// Labels and Annotations are set to these values.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// AddTaints are added unless the Node has a taint with the same key
	// and effect.
	AddTaints []corev1.Taint `json:"addTaints,omitempty"`
	// RemoveTaints remove every Node taint with the same key and effect.
	RemoveTaints []corev1.Taint `json:"removeTaints,omitempty"`
	// AddFinalizers are added unless present.
	AddFinalizers []string `json:"addFinalizers,omitempty"`
	// AddOwnerReferences are added unless one with the same UID is present.
	AddOwnerReferences []metav1.OwnerReference `json:"addOwnerReferences,omitempty"`
}

// IsEmpty reports whether the patch changes nothing.
func (p NodePatch) IsEmpty() bool {
	return len(p.Labels) == 0 && len(p.Annotations) == 0 && len(p.AddTaints) == 0 &&
		len(p.RemoveTaints) == 0 && len(p.AddFinalizers) == 0 && len(p.AddOwnerReferences) == 0
}

// Apply makes the patch's changes to n in place. It allocates new maps and
// slices for what it changes, so n may be a shallow copy of a shared
// object.
func (p NodePatch) Apply(n *corev1.Node) {
	if len(p.Labels) > 0 {
		n.Labels = maps.Clone(n.Labels)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, p.Labels)
	}
	if len(p.Annotations) > 0 {
		n.Annotations = maps.Clone(n.Annotations)
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		maps.Copy(n.Annotations, p.Annotations)
	}
	if len(p.RemoveTaints) > 0 || len(p.AddTaints) > 0 {
		taints := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return hasTaint(p.RemoveTaints, t) })
		for _, t := range p.AddTaints {
			if !hasTaint(taints, t) {
				taints = append(taints, t)
			}
		}
		n.Spec.Taints = taints
	}
	for _, f := range p.AddFinalizers {
		if !slices.Contains(n.Finalizers, f) {
			n.Finalizers = append(slices.Clone(n.Finalizers), f)
		}
	}
	for _, ref := range p.AddOwnerReferences {
		if !slices.ContainsFunc(n.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == ref.UID }) {
			n.OwnerReferences = append(slices.Clone(n.OwnerReferences), ref)
		}
	}
}

// Registration is what Register decided for one Node.
type Registration struct {
	// NodeClaim is the Node's NodeClaim with its status brought up to date
	// (nodeName, Registered, Initialized, Ready).
	NodeClaim v1.NodeClaim
	// Changed reports whether NodeClaim differs from the stored one and
	// must be written.
	Changed bool
	// Patch is what the Node needs; empty when it is in sync.
	Patch NodePatch
	// Warnings are Karpenter's warning events for the NodeClaim, as
	// "Reason: message" (e.g. UnregisteredTaintMissing).
	Warnings []string
	// FirstRegistration is true when this decision links the Node to a
	// NodeClaim that had none (status.nodeName was empty): the moment
	// Karpenter counts karpenter_nodes_created_total. Registrar.Register
	// reports it only with the write that made it so.
	FirstRegistration bool
}

// Register links a Node that joined to the NodeClaim whose providerID it
// carries and decides what registration and initialization change
// (karpenter-spec section 5.1, 11.3 items 19-20; karpenter:
// nodeclaim/lifecycle/registration.go and initialization.go).
//
// Registration happens once per Node, until the Node carries
// karpenter.sh/registered=true (the patch sets that label together with
// everything else, so a lost patch is recomputed on the next call): the
// NodeClaim's labels and annotations are set on the Node (the NodeClaim's
// value wins); its taints and startup taints are added unless the Node is
// labelled karpenter.sh/do-not-sync-taints=true (the kubelet registered
// them itself); the karpenter.sh/unregistered taint is removed (its absence
// is reported as the UnregisteredTaintMissing warning); the Node gets
// finalizer karpenter.sh/termination and an owner reference to the
// NodeClaim; the NodeClaim gets status.nodeName and Registered=True.
//
// Initialization is then judged on the Node as patched: Initialized=True
// and label karpenter.sh/initialized=true once the Node is Ready, none of
// the NodeClaim's startup taints and no known ephemeral taint remain, and
// every resource the NodeClaim requests has non-zero allocatable (extended
// resources appear when their device plugin registers); otherwise
// Initialized=Unknown with Karpenter's reason. An initialized NodeClaim
// stays initialized (only the label is restored if the Node lost it), and
// Ready follows Launched, Registered and Initialized.
//
// A NodeClaim already linked to a Node of another name gets
// Registered=False, MultipleNodesFound, and no patch. A NodeClaim being
// deleted is left alone. Errors: ErrInvalidInput for a nil Node or one
// without providerID, ErrNoNodeClaim when no claim carries the providerID,
// and an error when several do.
func Register(node *corev1.Node, claims []v1.NodeClaim, now time.Time) (Registration, error) {
	if node == nil {
		return Registration{}, fmt.Errorf("register: node: nil: %w", ErrInvalidInput)
	}
	if node.Spec.ProviderID == "" {
		return Registration{}, fmt.Errorf("register node %s: providerID: required: %w", node.Name, ErrInvalidInput)
	}
	var matched []int
	for i := range claims {
		if claims[i].Status.ProviderID == node.Spec.ProviderID {
			matched = append(matched, i)
		}
	}
	switch len(matched) {
	case 0:
		return Registration{}, fmt.Errorf("register node %s (%s): %w", node.Name, node.Spec.ProviderID, ErrNoNodeClaim)
	case 1:
	default:
		names := make([]string, len(matched))
		for i, m := range matched {
			names[i] = claims[m].Name
		}
		return Registration{}, fmt.Errorf("register node %s: nodeclaims %v all claim providerID %s", node.Name, names, node.Spec.ProviderID)
	}
	stored := claims[matched[0]]
	claim := stored
	reg := Registration{Patch: NodePatch{Node: node.Name}}
	if claim.DeletionTimestamp != nil {
		reg.NodeClaim = claim
		return reg, nil
	}
	if claim.Status.NodeName != "" && claim.Status.NodeName != node.Name {
		setClaimCondition(&claim, v1.ConditionTypeRegistered, metav1.ConditionFalse, ReasonMultipleNodesFound,
			fmt.Sprintf("nodes %s and %s have providerID %s", claim.Status.NodeName, node.Name, node.Spec.ProviderID), now)
		reg.NodeClaim, reg.Changed = claim, !reflect.DeepEqual(stored.Status, claim.Status)
		return reg, nil
	}

	if node.Labels[v1.LabelRegistered] != "true" {
		reg.Patch, reg.Warnings = syncPatch(node, &claim)
	}
	after := *node
	reg.Patch.Apply(&after)
	reg.FirstRegistration = stored.Status.NodeName == ""
	claim.Status.NodeName = node.Name
	setClaimCondition(&claim, v1.ConditionTypeRegistered, metav1.ConditionTrue, "", "", now)

	// Initialization is judged until it succeeds once; an initialized
	// NodeClaim stays initialized (karpenter: initialization.go).
	reason, message := "", ""
	if !isTrue(&claim, v1.ConditionTypeInitialized) {
		reason, message = initGate(&after, &claim)
	}
	if reason != "" {
		setClaimCondition(&claim, v1.ConditionTypeInitialized, metav1.ConditionUnknown, reason, message, now)
	} else {
		setClaimCondition(&claim, v1.ConditionTypeInitialized, metav1.ConditionTrue, "", "", now)
		if after.Labels[v1.LabelInitialized] != "true" {
			if reg.Patch.Labels == nil {
				reg.Patch.Labels = map[string]string{}
			}
			reg.Patch.Labels[v1.LabelInitialized] = "true"
		}
	}
	reg.NodeClaim = claim
	reg.Changed = !reflect.DeepEqual(stored.Status, claim.Status)
	return reg, nil
}

// syncPatch is the registration sync of a NodeClaim onto its Node
// (karpenter: registration.go syncNode).
func syncPatch(node *corev1.Node, claim *v1.NodeClaim) (NodePatch, []string) {
	p := NodePatch{Node: node.Name, Labels: map[string]string{}, Annotations: map[string]string{}}
	for k, v := range claim.Labels {
		if cur, ok := node.Labels[k]; !ok || cur != v {
			p.Labels[k] = v
		}
	}
	p.Labels[v1.LabelRegistered] = "true"
	for k, v := range claim.Annotations {
		if cur, ok := node.Annotations[k]; !ok || cur != v {
			p.Annotations[k] = v
		}
	}
	if len(p.Annotations) == 0 {
		p.Annotations = nil
	}
	if node.Labels[v1.LabelDoNotSyncTaints] != "true" {
		for _, t := range slices.Concat(claim.Spec.Taints, claim.Spec.StartupTaints) {
			if !hasTaint(node.Spec.Taints, t) && !hasTaint(p.AddTaints, t) {
				p.AddTaints = append(p.AddTaints, t)
			}
		}
	}
	var warnings []string
	if hasTaint(node.Spec.Taints, unregisteredTaint) {
		p.RemoveTaints = []corev1.Taint{unregisteredTaint}
	} else {
		warnings = append(warnings, fmt.Sprintf("UnregisteredTaintMissing: node %s registered without taint %s:%s", node.Name, unregisteredTaint.Key, unregisteredTaint.Effect))
	}
	if !slices.Contains(node.Finalizers, v1.TerminationFinalizer) {
		p.AddFinalizers = []string{v1.TerminationFinalizer}
	}
	// Karpenter also makes the NodeClaim the Node's owner. nodewright does
	// not: its NodeClaims live in DynamoDB, and the karpenter.sh/v1 objects in
	// the cluster are mirrors whose UIDs the API server assigns. An owner
	// reference carrying the stored UID names an object the cluster does not
	// have, so the garbage collector would delete the Node as an orphan (and
	// one carrying the mirror's UID would delete it whenever the mirror is
	// re-created). Nodes are removed by nodewright's own termination and
	// garbage collection instead.
	return p, warnings
}

// initGate returns the reason and message the NodeClaim is not initialized
// yet, or "" when it is (karpenter: initialization.go).
func initGate(node *corev1.Node, claim *v1.NodeClaim) (reason, message string) {
	if !v1.NodeReady(node) {
		return ReasonNodeNotReady, "Node status is NotReady"
	}
	for _, t := range claim.Spec.StartupTaints {
		if hasTaint(node.Spec.Taints, t) {
			return ReasonStartupTaintsExist, fmt.Sprintf("StartupTaint %q still exists", taintString(t))
		}
	}
	for _, t := range knownEphemeralTaints {
		if hasTaint(node.Spec.Taints, t) {
			return ReasonKnownEphemeralTaintsExist, fmt.Sprintf("KnownEphemeralTaint %q still exists", taintString(t))
		}
	}
	names := make([]string, 0, len(claim.Spec.Resources.Requests))
	for name := range claim.Spec.Resources.Requests {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		q := claim.Spec.Resources.Requests[corev1.ResourceName(name)]
		if q.IsZero() {
			continue
		}
		if a, ok := node.Status.Allocatable[corev1.ResourceName(name)]; !ok || a.IsZero() {
			return ReasonResourceNotRegistered, fmt.Sprintf("Resource %q was requested but not registered", name)
		}
	}
	return "", ""
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// registrationStore is the NodeClaim store as registration uses it.
type registrationStore interface {
	// NodeClaimByProviderID returns the NodeClaim whose status.providerID
	// is providerID, with its current ResourceVersion, or an error
	// matching v1.ErrNotFound.
	NodeClaimByProviderID(ctx context.Context, providerID string) (v1.NodeClaim, error)
	// UpdateNodeClaim is claimStore's version-checked update.
	UpdateNodeClaim(ctx context.Context, claim v1.NodeClaim) (v1.NodeClaim, error)
}

// Registrar registers Nodes against the NodeClaim store. It holds no state
// and is safe for concurrent use.
type Registrar struct {
	claims registrationStore
}

// NewRegistrar returns a Registrar over claims.
func NewRegistrar(claims registrationStore) (*Registrar, error) {
	if claims == nil {
		return nil, fmt.Errorf("registrar: claims: %w", errMissing)
	}
	return &Registrar{claims: claims}, nil
}

// Register reads the NodeClaim of node, decides with the package-level
// Register, and writes the NodeClaim when it changed (version-checked; on a
// conflict it re-reads and decides again, up to three times). It returns
// the decision, whose NodeClaim is the stored one; the caller applies
// Patch to the Node. Calling it again for the same Node is harmless: a
// registered, initialized Node yields an empty patch and no write.
func (r *Registrar) Register(ctx context.Context, node *corev1.Node, now time.Time) (Registration, error) {
	if node == nil || node.Spec.ProviderID == "" {
		return Register(node, nil, now)
	}
	for range 3 {
		claim, err := r.claims.NodeClaimByProviderID(ctx, node.Spec.ProviderID)
		if errors.Is(err, v1.ErrNotFound) {
			return Registration{}, fmt.Errorf("register node %s (%s): %w", node.Name, node.Spec.ProviderID, ErrNoNodeClaim)
		}
		if err != nil {
			return Registration{}, fmt.Errorf("register node %s: find nodeclaim: %w", node.Name, err)
		}
		reg, err := Register(node, []v1.NodeClaim{claim}, now)
		if err != nil || !reg.Changed {
			reg.FirstRegistration = false // nothing written: an earlier call registered it
			return reg, err
		}
		updated, err := r.claims.UpdateNodeClaim(ctx, reg.NodeClaim)
		if errors.Is(err, v1.ErrConflict) {
			continue
		}
		if err != nil {
			return Registration{}, fmt.Errorf("register node %s: update nodeclaim %s: %w", node.Name, claim.Name, err)
		}
		reg.NodeClaim = updated
		return reg, nil
	}
	return Registration{}, fmt.Errorf("register node %s: nodeclaim kept changing: %w", node.Name, v1.ErrConflict)
}
