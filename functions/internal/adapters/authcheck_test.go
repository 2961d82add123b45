package adapters_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/functions/internal/adapters"
	"github.com/nodewright/nodewright/local/ec2sim"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// TestAuthCheckOverTheSimulator runs the dry runs of a resolved class
// against the EC2 simulator: allowed, CreateFleet denied for the class's
// tag (ValidationSucceeded=False naming ec2:CreateFleet, launches left
// out), a throttled dry run keeping that verdict, and recovery once the
// denial is lifted and the 30 minutes have passed.
func TestAuthCheckOverTheSimulator(t *testing.T) {
	sim, err := ec2sim.New(ec2sim.Options{ClusterName: "c1", Clock: ec2sim.NewFakeClock(t0)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	creds := credentials.NewStaticCredentialsProvider("a", "b", "")
	hc := &http.Client{Transport: ec2sim.LoopbackTransport(srv.Client().Transport)}
	ec2c := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, HTTPClient: hc})
	resolver := nodeclass.New(ec2c, ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: creds, HTTPClient: hc}),
		func() time.Time { return t0 })
	nc := v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 3, UID: "uid-default"}, Spec: v1.EC2NodeClassSpec{
		AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       "NodeRole",
		Tags:                       map[string]string{"team": "a"},
		SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
		SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "c1"}}},
	}}
	res, err := adapters.NodeClasses{Resolver: resolver, KubernetesVersion: "1.33"}.ResolveNodeClass(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	resolved := res.NodeClass
	types := []*catalog.InstanceType{{Name: "m5.large", Labels: map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux", v1.LabelInstanceType: "m5.large"}}}
	checker := &provisioning.AuthChecker{
		DryRuns:  nodeclass.AuthDryRuns{API: ec2c, Templates: resolver, Cluster: nodeclass.Cluster{Name: "c1", Endpoint: "https://c1.example", CABundle: "Y2E=", ServiceCIDR: "10.100.0.0/16"}},
		Verdicts: adapters.AuthVerdicts{Store: newStore(t), Now: func() time.Time { return t0 }},
	}
	check := func(at time.Duration) (metav1.Condition, bool) {
		return checker.Condition(context.Background(), resolved, types, t0.Add(at))
	}
	dryRuns := func() int {
		n := 0
		for _, c := range sim.Calls() {
			if c.Params.Get("DryRun") == "true" {
				n++
			}
		}
		return n
	}

	if c, ok := check(0); !ok || c.Status != metav1.ConditionTrue {
		t.Fatalf("allowed: %+v %v, want True", c, ok)
	}
	if got := dryRuns(); got != 3 {
		t.Errorf("first check made %d dry runs, want 3", got)
	}
	if len(sim.Instances()) != 0 || len(sim.Fleets()) != 0 {
		t.Errorf("the check launched %d instances, %d fleets", len(sim.Instances()), len(sim.Fleets()))
	}
	// The dry runs carry the class's launch tags, so a tag-conditioned
	// denial meets them.
	if err := sim.Deny(ec2sim.Denial{Action: "CreateFleet", RequestTags: map[string]string{"team": "a", "karpenter.k8s.aws/ec2nodeclass": "default"}}); err != nil {
		t.Fatal(err)
	}
	if c, _ := check(10 * time.Minute); c.Status != metav1.ConditionTrue || dryRuns() != 3 {
		t.Errorf("within 30 minutes: %+v after %d dry runs, want the cached True after 3", c, dryRuns())
	}
	c, ok := check(30 * time.Minute)
	if !ok || c.Status != metav1.ConditionFalse || c.Reason != "CreateFleetAuthCheckFailed" || !strings.Contains(c.Message, "ec2:CreateFleet") {
		t.Fatalf("denied: %+v, want False CreateFleetAuthCheckFailed naming ec2:CreateFleet", c)
	}
	// Throttled: the last verdict (False) stands.
	sim.Allow("CreateFleet")
	sim.Throttle("CreateLaunchTemplate", 1)
	if c, _ := check(61 * time.Minute); c.Reason != "CreateFleetAuthCheckFailed" {
		t.Errorf("throttled: %+v, want the last verdict CreateFleetAuthCheckFailed", c)
	}
	// Allowed again and the check due: True.
	if c, _ := check(62 * time.Minute); c.Status != metav1.ConditionTrue {
		t.Errorf("recovered: %+v, want True", c)
	}
	// A second checker over the same store (another invocation) makes no
	// dry run while the verdict stands.
	before := dryRuns()
	other := &provisioning.AuthChecker{DryRuns: checker.DryRuns, Verdicts: checker.Verdicts}
	if c, _ := other.Condition(context.Background(), resolved, types, t0.Add(70*time.Minute)); c.Status != metav1.ConditionTrue || dryRuns() != before {
		t.Errorf("second invocation: %+v, %d new dry runs; want the stored True, none", c, dryRuns()-before)
	}
}
