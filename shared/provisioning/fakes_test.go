package provisioning_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/requirements"
)

// The fakes below stand in for the ports with in-memory state. Each test
// builds its own (newEnv); nothing is shared between tests.

const (
	testCluster = "test-cluster"
	testRegion  = "us-east-1"
)

// t0 is the fixed clock origin of every test.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// store is an in-memory NodeClaim and batch store with versions, as the
// DynamoDB store behaves: create-only creates, version-checked updates and
// deletes.
type store struct {
	mu      sync.Mutex
	claims  map[string]v1.NodeClaim
	batches map[string]v1.PodBatchResult
	// failUpdates makes the next n UpdateNodeClaim calls fail with a
	// transport error, before any write.
	failUpdates int
	creates     []string
	deletes     []string
}

func newStore() *store {
	return &store{claims: map[string]v1.NodeClaim{}, batches: map[string]v1.PodBatchResult{}}
}

func (s *store) ListNodeClaims(context.Context) ([]v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]v1.NodeClaim, 0, len(s.claims))
	for _, name := range slices.Sorted(maps.Keys(s.claims)) {
		out = append(out, s.claims[name])
	}
	return out, nil
}

func (s *store) GetNodeClaim(_ context.Context, name string) (v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[name]
	if !ok {
		return v1.NodeClaim{}, fmt.Errorf("get nodeclaim %s: %w", name, v1.ErrNotFound)
	}
	return c, nil
}

func (s *store) CreateNodeClaim(_ context.Context, c v1.NodeClaim) (v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.claims[c.Name]; ok {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: %w", c.Name, v1.ErrAlreadyExists)
	}
	if c.ResourceVersion != "" {
		return v1.NodeClaim{}, fmt.Errorf("create nodeclaim %s: resourceVersion set", c.Name)
	}
	c.ResourceVersion = "1"
	s.claims[c.Name] = c
	s.creates = append(s.creates, c.Name)
	return c, nil
}

func (s *store) UpdateNodeClaim(_ context.Context, c v1.NodeClaim) (v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failUpdates > 0 {
		s.failUpdates--
		return v1.NodeClaim{}, errors.New("update nodeclaim: connection reset")
	}
	cur, ok := s.claims[c.Name]
	if !ok {
		return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", c.Name, v1.ErrNotFound)
	}
	if cur.ResourceVersion != c.ResourceVersion {
		return v1.NodeClaim{}, fmt.Errorf("update nodeclaim %s: %w", c.Name, v1.ErrConflict)
	}
	v, _ := strconv.Atoi(cur.ResourceVersion)
	c.ResourceVersion = strconv.Itoa(v + 1)
	s.claims[c.Name] = c
	return c, nil
}

func (s *store) DeleteNodeClaim(_ context.Context, name, rv string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.claims[name]
	if !ok {
		return fmt.Errorf("delete nodeclaim %s: %w", name, v1.ErrNotFound)
	}
	if cur.ResourceVersion != rv {
		return fmt.Errorf("delete nodeclaim %s: %w", name, v1.ErrConflict)
	}
	delete(s.claims, name)
	s.deletes = append(s.deletes, name)
	return nil
}

func (s *store) NodeClaimByProviderID(_ context.Context, providerID string) (v1.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.claims {
		if c.Status.ProviderID == providerID {
			return c, nil
		}
	}
	return v1.NodeClaim{}, fmt.Errorf("nodeclaim with providerID %s: %w", providerID, v1.ErrNotFound)
}

func (s *store) BatchResult(_ context.Context, id string) (v1.PodBatchResult, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.batches[id]
	return r, ok, nil
}

func (s *store) PutBatchResult(_ context.Context, r v1.PodBatchResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches[r.BatchID] = r
	return nil
}

// put stores c as an existing NodeClaim at version 1.
func (s *store) put(c v1.NodeClaim) {
	c.ResourceVersion = "1"
	s.claims[c.Name] = c
}

// config serves a fixed configuration.
type config struct {
	pools   []v1.NodePool
	classes []v1.EC2NodeClass
}

func (c *config) ClusterConfig(context.Context) ([]v1.NodePool, []v1.EC2NodeClass, error) {
	return slices.Clone(c.pools), slices.Clone(c.classes), nil
}

// resolver fills a node class's status as the nodeclass adapter would:
// two subnets in us-east-1a and us-east-1b, one security group, one amd64
// AMI, Ready; placementGroup, when set, as status.placementGroup.
type resolver struct {
	fail           map[string]error
	placementGroup *v1.PlacementGroup
}

func (r *resolver) ResolveNodeClass(_ context.Context, nc v1.EC2NodeClass) (provisioning.ResolvedNodeClass, error) {
	if err := r.fail[nc.Name]; err != nil {
		return provisioning.ResolvedNodeClass{}, err
	}
	nc.Status = v1.EC2NodeClassStatus{
		Subnets: []v1.Subnet{
			{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1"},
			{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2"},
		},
		SecurityGroups:  []v1.SecurityGroup{{ID: "sg-1"}},
		AMIs:            []v1.AMI{{ID: "ami-amd64", Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}}},
		InstanceProfile: "test-cluster_profile",
		Conditions:      []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready"}},
		PlacementGroup:  r.placementGroup,
	}
	return provisioning.ResolvedNodeClass{NodeClass: nc, Subnets: []launch.Subnet{
		{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1", AvailableIPs: 250},
		{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2", AvailableIPs: 4000},
	}}, nil
}

// cluster serves a fixed cluster state.
type cluster struct{ state provisioning.ClusterState }

func (c *cluster) ClusterState(context.Context) (provisioning.ClusterState, error) {
	return c.state, nil
}

// offerings is the unavailable-offerings cache with TTLs.
type offerings struct {
	mu      sync.Mutex
	entries map[catalog.OfferingKey]time.Time
	marks   []mark
}

type mark struct {
	Offering catalog.OfferingKey
	Code     string
	Until    time.Time
}

func (o *offerings) UnavailableOfferings(_ context.Context, now time.Time) ([]catalog.OfferingKey, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []catalog.OfferingKey
	for k, until := range o.entries {
		if until.After(now) {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func (o *offerings) MarkUnavailable(_ context.Context, off catalog.OfferingKey, code string, now time.Time, ttl time.Duration) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.entries == nil {
		o.entries = map[catalog.OfferingKey]time.Time{}
	}
	o.entries[off] = now.Add(ttl)
	o.marks = append(o.marks, mark{Offering: off, Code: code, Until: now.Add(ttl)})
	return nil
}

// ec2 is a launcher with EC2's CreateFleet semantics at the level the
// use case sees: a repeated call for the same NodeClaim UID (the
// ClientToken) returns the first call's instance; the capacity type is spot
// when the claim allows it and a spot offering is available, else on-demand;
// offerings are tried cheapest first, and those in ice fail with
// InsufficientInstanceCapacity.
type ec2 struct {
	mu sync.Mutex
	// ice lists exhausted capacity pools.
	ice map[catalog.OfferingKey]bool
	// errs are returned by the next calls, one each, before anything else
	// happens.
	errs []error
	// lostResponses makes the next n successful launches return an error
	// after the instance exists (a timed-out response).
	lostResponses int
	// byToken maps a NodeClaim UID to its instance.
	byToken   map[types.UID]launch.Instance
	requests  []provisioning.LaunchRequest
	instances []launch.Instance
}

func newEC2() *ec2 {
	return &ec2{ice: map[catalog.OfferingKey]bool{}, byToken: map[types.UID]launch.Instance{}}
}

func (e *ec2) Launch(_ context.Context, req provisioning.LaunchRequest) (provisioning.LaunchResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests = append(e.requests, req)
	if len(e.errs) > 0 {
		err := e.errs[0]
		e.errs = e.errs[1:]
		return provisioning.LaunchResult{}, err
	}
	if inst, ok := e.byToken[req.NodeClaim.UID]; ok {
		return provisioning.LaunchResult{Instance: inst}, nil
	}
	reqs := requirements.FromNodeSelector(req.NodeClaim.Spec.Requirements)
	type cand struct {
		it *catalog.InstanceType
		o  catalog.Offering
	}
	allowed := func(ct string) []cand {
		var out []cand
		for _, it := range req.InstanceTypes {
			if r := reqs.Get(v1.LabelInstanceType); r != nil && !r.Has(it.Name) {
				continue
			}
			for _, o := range it.Offerings {
				if !o.Available || o.CapacityType != ct {
					continue
				}
				if r := reqs.Get(v1.LabelTopologyZone); r != nil && !r.Has(o.Zone) {
					continue
				}
				if r := reqs.Get(v1.LabelCapacityType); r != nil && !r.Has(o.CapacityType) {
					continue
				}
				out = append(out, cand{it, o})
			}
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].o.Price < out[j].o.Price })
		return out
	}
	cands := allowed(v1.CapacityTypeSpot)
	if len(cands) == 0 {
		cands = allowed(v1.CapacityTypeOnDemand)
	}
	var failed []launch.UnavailableOffering
	for _, c := range cands {
		off := catalog.OfferingKey{CapacityType: c.o.CapacityType, InstanceType: c.it.Name, Zone: c.o.Zone}
		if e.ice[off] {
			failed = append(failed, launch.UnavailableOffering{OfferingKey: off, Code: "InsufficientInstanceCapacity"})
			continue
		}
		inst := launch.Instance{
			ID: instanceID(req.NodeClaim.UID), InstanceType: c.it.Name, Zone: c.o.Zone,
			CapacityType: c.o.CapacityType, ImageID: "ami-amd64", State: "pending",
		}
		e.instances = append(e.instances, inst)
		e.byToken[req.NodeClaim.UID] = inst
		if e.lostResponses > 0 {
			e.lostResponses--
			return provisioning.LaunchResult{}, errors.New("create fleet: request timed out")
		}
		return provisioning.LaunchResult{Instance: inst, Unavailable: failed}, nil
	}
	reason := "no compatible offering"
	if len(failed) > 0 {
		reason = fmt.Sprintf("CreateFleet returned only capacity errors (%d)", len(failed))
	}
	return provisioning.LaunchResult{}, &launch.InsufficientCapacityError{Offerings: failed, Reason: reason}
}

// instanceID derives a fake instance ID from the ClientToken, so parallel
// launches get the same IDs in every run.
func instanceID(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return "i-" + hex.EncodeToString(sum[:])[:17]
}

// env is one test's ports and provisioner.
type env struct {
	store     *store
	config    *config
	resolver  *resolver
	cluster   *cluster
	offerings *offerings
	ec2       *ec2
}

func newEnv(pools []v1.NodePool, classes []v1.EC2NodeClass) *env {
	return &env{
		store:     newStore(),
		config:    &config{pools: pools, classes: classes},
		resolver:  &resolver{},
		cluster:   &cluster{},
		offerings: &offerings{},
		ec2:       newEC2(),
	}
}

func (e *env) provisioner(t testing.TB) *provisioning.Provisioner {
	t.Helper()
	p, err := provisioning.NewProvisioner(provisioning.ProvisionerPorts{
		Claims: e.store, Config: e.config, NodeClass: e.resolver, Cluster: e.cluster,
		Offerings: e.offerings, Batches: e.store, Launcher: e.ec2,
	}, provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion, SpotPriceRatio: 0.35})
	if err != nil {
		t.Fatalf("NewProvisioner() error = %v", err)
	}
	return p
}

// nodePool decodes a NodePool named name whose template requires yamlReqs
// (a YAML list) and refers to EC2NodeClass "default".
func nodePool(t testing.TB, name, yamlReqs string) v1.NodePool {
	t.Helper()
	doc := fmt.Sprintf(`
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: %s}
spec:
  template:
    spec:
      requirements: %s
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`, name, yamlReqs)
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("nodePool yaml: %v", err)
	}
	np, _, err := v1.DecodeNodePool(j)
	if err != nil {
		t.Fatalf("DecodeNodePool() error = %v", err)
	}
	return *np
}

// nodeClass is an AL2023 EC2NodeClass named "default".
func nodeClass(t testing.TB) v1.EC2NodeClass {
	t.Helper()
	doc := `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: KarpenterNodeRole-test-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test-cluster}}]
`
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("nodeClass yaml: %v", err)
	}
	nc, _, err := v1.DecodeEC2NodeClass(j)
	if err != nil {
		t.Fatalf("DecodeEC2NodeClass() error = %v", err)
	}
	return *nc
}

// podSummary is a pending pod requesting cpu, with a fixed UID.
func podSummary(name, cpu string) v1.PodSummary {
	return v1.PodSummary{
		Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute)),
		Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{
			Name: "app", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")},
		}}},
	}
}

func podBatch(id string, pods ...v1.PodSummary) *v1.PodBatch {
	return &v1.PodBatch{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatch},
		ID:       id, Cluster: testCluster, CreatedAt: metav1.NewTime(t0), Pods: pods,
	}
}
