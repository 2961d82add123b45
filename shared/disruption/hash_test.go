package disruption_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/manifest"
)

// decodeOne reads one Karpenter object from YAML with the repository's
// manifest reader, so the nil-versus-empty distinctions the hash depends
// on go through the same decoding as real manifests.
func decodeOne[T any](t *testing.T, doc string) *T {
	t.Helper()
	objs, err := manifest.Read(strings.NewReader(doc), "test")
	if err != nil {
		t.Fatalf("manifest.Read() error = %v", err)
	}
	if len(objs) != 1 {
		t.Fatalf("manifest.Read() = %d objects, want 1", len(objs))
	}
	obj, ok := objs[0].Typed.(*T)
	if !ok {
		t.Fatalf("manifest.Read() typed %T, want %T", objs[0].Typed, new(T))
	}
	return obj
}

// The goldens below are hashes Karpenter itself wrote, copied with the
// specs they belong to from `kubectl get/describe -o yaml` output that users
// and AWS published (EKS Auto Mode's built-in general-purpose NodePool as
// shown in AWS workshop material; a NodeClaim example in Karpenter's
// NodeClaims concept page, whose NodePool template had no taints; a public
// tutorial's `kubectl describe` of a NodePool and an EC2NodeClass). Only
// the fields that reach the hash are reproduced. A match shows that type
// names, field names, field order, nil-versus-empty handling and the
// hashstructure options are Karpenter's.
func TestNodePoolHashMatchesKarpenter(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{
			name: "EKS Auto Mode general-purpose NodePool",
			give: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general-purpose}
spec:
  disruption: {budgets: [{nodes: 10%}], consolidateAfter: 30s, consolidationPolicy: WhenEmptyOrUnderutilized}
  template:
    metadata: {}
    spec:
      expireAfter: 336h
      nodeClassRef: {group: eks.amazonaws.com, kind: NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      terminationGracePeriod: 24h0m0s
`,
			want: "4012513481623584108",
		},
		{
			name: "NodePool written with empty taints and startupTaints lists",
			give: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ondemand-nodepool}
spec:
  limits: {cpu: "50"}
  template:
    spec:
      expireAfter: 720h
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default-ec2nodeclass}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      startupTaints: []
      taints: []
`,
			want: "11142864721958693070",
		},
		{
			name: "NodePool with an empty nodeClassRef group and a terminationGracePeriod",
			give: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      expireAfter: 720h0m0s
      nodeClassRef: {group: "", kind: EC2NodeClass, name: default}
      requirements: []
      terminationGracePeriod: 1h0m0s
`,
			want: "377058807571762610",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := disruption.NodePoolHash(decodeOne[v1.NodePool](t, tt.give))
			if err != nil {
				t.Fatalf("NodePoolHash() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("NodePoolHash() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestEC2NodeClassHashMatchesKarpenter(t *testing.T) {
	nc := decodeOne[v1.EC2NodeClass](t, `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default-ec2nodeclass}
spec:
  amiFamily: AL2023
  amiSelectorTerms: [{alias: al2023@latest}]
  blockDeviceMappings:
  - deviceName: /dev/xvda
    ebs: {deleteOnTermination: true, encrypted: true, volumeSize: 20Gi, volumeType: gp3}
  metadataOptions: {httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 2, httpTokens: required}
  role: arn:aws:iam::088354478627:role/drwp-dev-karpenter-node-role
  securityGroupSelectorTerms: [{tags: {kubernetes.io/cluster/eks-control-plane: owned}}]
  subnetSelectorTerms: [{tags: {kubernetes.io/cluster/eks-control-plane: owned, kubernetes.io/role/internal-elb: "1"}}]
  tags: {karpenter.sh/discovery: eks-control-plane}
`)
	hash, version, err := disruption.EC2NodeClassHash(nc, "")
	if err != nil {
		t.Fatalf("EC2NodeClassHash() error = %v", err)
	}
	if diff := cmp.Diff([2]string{"6409880261969345973", "v4"}, [2]string{hash, version}); diff != "" {
		t.Errorf("EC2NodeClassHash() mismatch (-want +got):\n%s", diff)
	}
}

const basePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  weight: 10
  limits: {cpu: "100"}
  disruption: {consolidateAfter: 30s, consolidationPolicy: WhenEmptyOrUnderutilized, budgets: [{nodes: 10%}]}
  template:
    metadata: {labels: {team: a}, annotations: {owner: payments}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}]
      taints: [{key: dedicated, value: a, effect: NoSchedule}]
      startupTaints: [{key: init, effect: NoSchedule}]
      expireAfter: 720h
      terminationGracePeriod: 1h
`

func TestNodePoolHashChangesOnlyWithTheTemplate(t *testing.T) {
	base, err := disruption.NodePoolHash(decodeOne[v1.NodePool](t, basePool))
	if err != nil {
		t.Fatalf("NodePoolHash(base) error = %v", err)
	}
	tests := []struct {
		name      string
		edit      func(*v1.NodePool)
		wantDrift bool
	}{
		{"weight never drifts", func(np *v1.NodePool) { np.Spec.Weight = ptr(int32(90)) }, false},
		{"limits never drift", func(np *v1.NodePool) { np.Spec.Limits = v1.Limits{"cpu": resource.MustParse("5")} }, false},
		{"disruption budgets never drift", func(np *v1.NodePool) { np.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}} }, false},
		{"consolidateAfter never drifts", func(np *v1.NodePool) { np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillable("Never") }, false},
		{"consolidationPolicy never drifts", func(np *v1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty }, false},
		{"requirements are not hashed", func(np *v1.NodePool) { np.Spec.Template.Spec.Requirements = nil }, false},
		{"expireAfter written as 720h0m0s is the same duration", func(np *v1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillable("720h0m0s")
		}, false},
		{"template labels drift", func(np *v1.NodePool) { np.Spec.Template.ObjectMeta.Labels["team"] = "b" }, true},
		{"template annotations drift", func(np *v1.NodePool) { np.Spec.Template.ObjectMeta.Annotations["owner"] = "search" }, true},
		{"taints drift", func(np *v1.NodePool) { np.Spec.Template.Spec.Taints[0].Value = "b" }, true},
		{"startupTaints drift", func(np *v1.NodePool) { np.Spec.Template.Spec.StartupTaints = nil }, true},
		{"nodeClassRef drifts", func(np *v1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" }, true},
		{"expireAfter drifts", func(np *v1.NodePool) { np.Spec.Template.Spec.ExpireAfter = v1.MustParseNillable("24h") }, true},
		{"terminationGracePeriod drifts", func(np *v1.NodePool) { np.Spec.Template.Spec.TerminationGracePeriod = v1.NewDuration(0) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := decodeOne[v1.NodePool](t, basePool)
			tt.edit(np)
			got, err := disruption.NodePoolHash(np)
			if err != nil {
				t.Fatalf("NodePoolHash() error = %v", err)
			}
			if drift := got != base; drift != tt.wantDrift {
				t.Errorf("NodePoolHash() = %s, base %s: drift = %v, want %v", got, base, drift, tt.wantDrift)
			}
		})
	}
}

func TestNodePoolHashAppliesTheExpireAfterDefault(t *testing.T) {
	without := decodeOne[v1.NodePool](t, strings.Replace(basePool, "      expireAfter: 720h\n", "", 1))
	with := decodeOne[v1.NodePool](t, basePool)
	a, errA := disruption.NodePoolHash(without)
	b, errB := disruption.NodePoolHash(with)
	if errA != nil || errB != nil {
		t.Fatalf("NodePoolHash() errors = %v, %v", errA, errB)
	}
	if a != b {
		t.Errorf("NodePoolHash() without expireAfter = %s, with 720h = %s; want equal", a, b)
	}
	if without.Spec.Template.Spec.ExpireAfter.IsSet() {
		t.Errorf("NodePoolHash() changed its argument: expireAfter = %q", without.Spec.Template.Spec.ExpireAfter.Raw)
	}
}

const baseClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  role: KarpenterNodeRole-demo
  userData: "echo hello"
  tags: {team: a}
  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 20Gi, volumeType: gp3}}]
`

func TestEC2NodeClassHashChangesOnlyWithHashedFields(t *testing.T) {
	base, _, err := disruption.EC2NodeClassHash(decodeOne[v1.EC2NodeClass](t, baseClass), "")
	if err != nil {
		t.Fatalf("EC2NodeClassHash(base) error = %v", err)
	}
	tests := []struct {
		name      string
		edit      func(*v1.EC2NodeClass)
		wantDrift bool
	}{
		{"subnetSelectorTerms are not hashed", func(nc *v1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{ID: "subnet-1"}} }, false},
		{"securityGroupSelectorTerms are not hashed", func(nc *v1.EC2NodeClass) {
			nc.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{ID: "sg-1"}}
		}, false},
		{"amiSelectorTerms are not hashed", func(nc *v1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "al2023@v20240807"}}
		}, false},
		{"an amiFamily equal to the alias family is not a change", func(nc *v1.EC2NodeClass) { nc.Spec.AMIFamily = ptr(v1.AMIFamilyAL2023) }, false},
		{"the CRD default metadataOptions are not a change", func(nc *v1.EC2NodeClass) { nc.SetDefaults() }, false},
		{"ipPrefixCount is not hashed", func(nc *v1.EC2NodeClass) { nc.Spec.IPPrefixCount = ptr(int32(2)) }, false},
		{"tags drift", func(nc *v1.EC2NodeClass) { nc.Spec.Tags["team"] = "b" }, true},
		{"userData drifts", func(nc *v1.EC2NodeClass) { nc.Spec.UserData = ptr("echo bye") }, true},
		{"blockDeviceMappings volumeSize drifts", func(nc *v1.EC2NodeClass) {
			q := resource.MustParse("40Gi")
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = &q
		}, true},
		{"role drifts", func(nc *v1.EC2NodeClass) { nc.Spec.Role = "other" }, true},
		{"a placementGroupSelector drifts", func(nc *v1.EC2NodeClass) {
			nc.Spec.PlacementGroupSelector = &v1.PlacementGroupSelector{Name: "training"}
		}, true},
		{"a resolved placement group alone does not", func(nc *v1.EC2NodeClass) { nc.Status.PlacementGroup = &v1.PlacementGroup{ID: "pg-0a1"} }, false},
		{"a Custom amiFamily drifts", func(nc *v1.EC2NodeClass) { nc.Spec.AMIFamily = ptr(v1.AMIFamilyCustom) }, true},
		{"metadataOptions hop limit drifts", func(nc *v1.EC2NodeClass) {
			nc.SetDefaults()
			nc.Spec.MetadataOptions.HTTPPutResponseHopLimit = ptr(int64(2))
		}, true},
		{"detailedMonitoring drifts", func(nc *v1.EC2NodeClass) { nc.Spec.DetailedMonitoring = ptr(true) }, true},
		{"kubelet drifts", func(nc *v1.EC2NodeClass) { nc.Spec.Kubelet = &v1.KubeletConfiguration{MaxPods: ptr(int32(110))} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := decodeOne[v1.EC2NodeClass](t, baseClass)
			tt.edit(nc)
			got, _, err := disruption.EC2NodeClassHash(nc, "")
			if err != nil {
				t.Fatalf("EC2NodeClassHash() error = %v", err)
			}
			if drift := got != base; drift != tt.wantDrift {
				t.Errorf("EC2NodeClassHash() = %s, base %s: drift = %v, want %v", got, base, drift, tt.wantDrift)
			}
		})
	}
}

func TestEC2NodeClassHashWithCABundleUsesItsOwnVersion(t *testing.T) {
	nc := decodeOne[v1.EC2NodeClass](t, baseClass)
	plain, plainVer, err1 := disruption.EC2NodeClassHash(nc, "")
	ca1, caVer, err2 := disruption.EC2NodeClassHash(nc, "LS0tLS1CRUdJTi1h")
	ca2, _, err3 := disruption.EC2NodeClassHash(nc, "LS0tLS1CRUdJTi1i")
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			t.Fatalf("EC2NodeClassHash() error = %v", err)
		}
	}
	if diff := cmp.Diff([]string{"v4", "v5"}, []string{plainVer, caVer}); diff != "" {
		t.Errorf("versions mismatch (-want +got):\n%s", diff)
	}
	if plain == ca1 || ca1 == ca2 {
		t.Errorf("hashes without CA %s, CA a %s, CA b %s: want all different", plain, ca1, ca2)
	}
}

func ptr[T any](v T) *T { return &v }
