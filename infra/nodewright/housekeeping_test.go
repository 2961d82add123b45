package nodewright

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTaggingAndTemplateCleanupGrants checks the grants of post-registration
// tagging, launch-template cleanup and termination against Karpenter's
// controller policy (karpenter-spec 4.1), narrowed by nodewright's
// ownership mark (nodewright.dev/owner=<cluster>, which Karpenter never
// writes): CreateTags on nodewright's own node-pool instances for the three
// registration keys only, DeleteLaunchTemplate on nodewright's own
// node-pool templates, TerminateInstances for garbage collection on
// nodewright's own instances only (so gc cannot terminate an instance
// Karpenter launched), and for the drain-and-replace steps on the cluster's
// node-pool instances (adopted ones carry Karpenter's tags only), each only
// to the functions that call it.
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
			return a == "ec2:DeleteLaunchTemplate" || a == "ec2:TerminateInstances" || (a == "ec2:CreateTags" && st.sid != "TagOnCreation")
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
	owned := "StringEquals aws:ResourceTag/kubernetes.io/cluster/" + cluster + "=owned; " +
		"StringEquals aws:ResourceTag/nodewright.dev/owner=" + cluster + "; "
	tagConds := "ForAllValues:StringEquals aws:TagKeys=eks:eks-cluster-name,karpenter.sh/nodeclaim,Name; " + owned +
		"StringEqualsIfExists aws:RequestTag/eks:eks-cluster-name=" + cluster + "; " +
		"StringLike aws:ResourceTag/karpenter.sh/nodepool=*"
	ownedConds := owned + "StringLike aws:ResourceTag/karpenter.sh/nodepool=*"
	clusterConds := "StringEquals aws:ResourceTag/kubernetes.io/cluster/" + cluster + "=owned; StringLike aws:ResourceTag/karpenter.sh/nodepool=*"
	want := []view{
		{Owner: camel("disrupttask"), Sid: "TerminateClusterInstances", Resources: instances, Conditions: clusterConds},
		{Owner: camel("gc"), Sid: "DeleteClusterLaunchTemplates", Resources: templates, Conditions: ownedConds},
		{Owner: camel("gc"), Sid: "TagClusterInstances", Resources: instances, Conditions: tagConds},
		{Owner: camel("gc"), Sid: "TerminateOwnedInstances", Resources: instances, Conditions: ownedConds},
		{Owner: camel("provisioner"), Sid: "TagClusterInstances", Resources: instances, Conditions: tagConds},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tagging and template-cleanup grants mismatch (-want +got):\n%s", diff)
	}
}

// TestLaunchesCarryTheOwnershipMark checks that every grant creating
// instances or launch templates (CreateFleet, RunInstances,
// CreateLaunchTemplate, tag-on-create) requires the request to carry
// nodewright's ownership mark for the cluster, and that launches may use
// only launch templates carrying it: what nodewright creates is always
// marked, so garbage collection can require the mark.
func TestLaunchesCarryTheOwnershipMark(t *testing.T) {
	f := newFixture(t)
	props := baseProps(f)
	_, c := mustTemplate(t, props)
	cluster := props.Cluster.Name
	checked := 0
	for _, st := range c.identityStatements() {
		if st.effect != "Allow" || !slices.ContainsFunc(st.actions, func(a string) bool {
			return a == "ec2:CreateFleet" || a == "ec2:RunInstances" || a == "ec2:CreateLaunchTemplate"
		}) || st.sid == "LaunchWithReferencedResources" {
			continue
		}
		checked++
		key := "aws:RequestTag/nodewright.dev/owner"
		if st.sid == "LaunchWithClusterLaunchTemplates" {
			key = "aws:ResourceTag/nodewright.dev/owner"
		}
		if got := render(st.conditions["StringEquals"][key]); got != cluster {
			t.Errorf("%s %s: StringEquals %s = %q, want %q", st.owner, st.sid, key, got, cluster)
		}
	}
	if checked == 0 {
		t.Error("no statement grants a launch: the check checked nothing")
	}
}
