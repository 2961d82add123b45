package nodewright

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTaggingAndTemplateCleanupGrants checks the grants of post-registration
// tagging and launch-template cleanup against Karpenter's controller
// policy (karpenter-spec 4.1): CreateTags on the cluster's node-pool
// instances for the three registration keys only, DeleteLaunchTemplate on
// the cluster's node-pool templates, each only to the functions that call
// it.
func TestTaggingAndTemplateCleanupGrants(t *testing.T) {
	f := newFixture(t)
	props := baseProps(f)
	_, c := mustTemplate(t, props)
	cluster := props.Cluster.Name

	type view struct {
		Owner, Sid, Resources, Conditions string
	}
	var got []view
	for _, st := range c.identityStatements() {
		if st.effect != "Allow" || !slices.ContainsFunc(st.actions, func(a string) bool {
			return a == "ec2:DeleteLaunchTemplate" || (a == "ec2:CreateTags" && st.sid != "TagOnCreation")
		}) {
			continue
		}
		owner := strings.TrimPrefix(st.owner, "Nodewright")
		owner = owner[:strings.Index(owner, "Role")]
		var conds []string
		for op, m := range st.conditions {
			for k, v := range m {
				conds = append(conds, op+" "+k+"="+render(v))
			}
		}
		slices.Sort(conds)
		got = append(got, view{Owner: owner, Sid: st.sid, Resources: strings.Join(st.resources, ","), Conditions: strings.Join(conds, "; ")})
	}
	slices.SortFunc(got, func(a, b view) int { return strings.Compare(a.Owner+a.Sid, b.Owner+b.Sid) })
	instances := "arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*"
	templates := "arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:launch-template/*"
	tagConds := "ForAllValues:StringEquals aws:TagKeys=eks:eks-cluster-name,karpenter.sh/nodeclaim,Name; " +
		"StringEquals aws:ResourceTag/kubernetes.io/cluster/" + cluster + "=owned; " +
		"StringEqualsIfExists aws:RequestTag/eks:eks-cluster-name=" + cluster + "; " +
		"StringLike aws:ResourceTag/karpenter.sh/nodepool=*"
	deleteConds := "StringEquals aws:ResourceTag/kubernetes.io/cluster/" + cluster + "=owned; StringLike aws:ResourceTag/karpenter.sh/nodepool=*"
	want := []view{
		{Owner: camel("gc"), Sid: "DeleteClusterLaunchTemplates", Resources: templates, Conditions: deleteConds},
		{Owner: camel("gc"), Sid: "TagClusterInstances", Resources: instances, Conditions: tagConds},
		{Owner: camel("provisioner"), Sid: "TagClusterInstances", Resources: instances, Conditions: tagConds},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tagging and template-cleanup grants mismatch (-want +got):\n%s", diff)
	}
}
