package nodewright

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/google/go-cmp/cmp"
)

// TestEC2DataReadGrants checks that only the refresher (gc) may call the
// live EC2 data read actions, and that with IsolatedVPC (Karpenter's
// ISOLATED_VPC) it gets ISOLATED_VPC=true and no pricing:GetProducts.
func TestEC2DataReadGrants(t *testing.T) {
	f := newFixture(t)
	reads := []string{"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeSpotPriceHistory", "pricing:GetProducts"}
	tests := []struct {
		name     string
		isolated bool
		want     []string
		env      any
	}{
		{
			name: "should let gc read instance types, offerings, Spot and on-demand prices",
			want: []string{
				"Gc ReadEC2Data ec2:DescribeInstanceTypeOfferings", "Gc ReadEC2Data ec2:DescribeInstanceTypes",
				"Gc ReadEC2Data ec2:DescribeSpotPriceHistory", "Gc ReadPrices pricing:GetProducts",
			},
			env: assertions.Match_Absent(),
		},
		{
			name:     "should withhold pricing:GetProducts and pass ISOLATED_VPC to gc, provisioner and disruption in an isolated VPC",
			isolated: true,
			want: []string{
				"Gc ReadEC2Data ec2:DescribeInstanceTypeOfferings", "Gc ReadEC2Data ec2:DescribeInstanceTypes",
				"Gc ReadEC2Data ec2:DescribeSpotPriceHistory",
			},
			env: "true",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			props := baseProps(f)
			props.IsolatedVPC = tt.isolated
			tmpl, c := mustTemplate(t, props)
			var got []string
			for _, st := range c.identityStatements() {
				if st.effect != "Allow" {
					continue
				}
				owner := strings.TrimPrefix(st.owner, "Nodewright")
				if i := strings.Index(owner, "Role"); i > 0 {
					owner = owner[:i]
				}
				for _, a := range st.actions {
					if slices.Contains(reads, a) {
						got = append(got, owner+" "+st.sid+" "+a)
					}
				}
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("EC2 data read grants mismatch (-want +got):\n%s", diff)
			}
			// gc refreshes; the provisioner and disruption Lambdas report
			// the option in the EC2DataLive condition.
			for _, fn := range []string{"gc", "provisioner", "disruption"} {
				hasProps(t, tmpl, "AWS::Lambda::Function", map[string]any{
					"Description": "nodewright " + specByName(t, fn).description,
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{"ISOLATED_VPC": tt.env})},
				})
			}
		})
	}
}
