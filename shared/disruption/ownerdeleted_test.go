package disruption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

func TestOwnerDeleted(t *testing.T) {
	claim := func(name, pool, class string, opts ...func(*v1.NodeClaim)) v1.NodeClaim {
		c := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if pool != "" {
			c.Labels[v1.LabelNodePool] = pool
		}
		if class != "" {
			c.Spec.NodeClassRef = &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: class}
		}
		for _, o := range opts {
			o(&c)
		}
		return c
	}
	deleting := func(c *v1.NodeClaim) { c.DeletionTimestamp = &metav1.Time{} }
	pool := func(name string, deleting bool) v1.NodePool {
		p := v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	class := func(name string, deleting bool) v1.EC2NodeClass {
		c := v1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if deleting {
			c.DeletionTimestamp = &metav1.Time{}
		}
		return c
	}
	tests := []struct {
		name    string
		claims  []v1.NodeClaim
		pools   []v1.NodePool
		classes []v1.EC2NodeClass
		want    []string // NodeClaim owner
	}{
		{
			name:    "should delete every NodeClaim of a deleted NodePool and none of a live one",
			claims:  []v1.NodeClaim{claim("web-b", "web", "default"), claim("batch-a", "batch", "default"), claim("web-a", "web", "default")},
			pools:   []v1.NodePool{pool("batch", false)},
			classes: []v1.EC2NodeClass{class("default", false)},
			want:    []string{"web-a NodePool/web", "web-b NodePool/web"},
		},
		{
			name:    "should delete the NodeClaims of a NodePool marked for deletion",
			claims:  []v1.NodeClaim{claim("web-a", "web", "default")},
			pools:   []v1.NodePool{pool("web", true)},
			classes: []v1.EC2NodeClass{class("default", false)},
			want:    []string{"web-a NodePool/web"},
		},
		{
			name:    "should delete the NodeClaims of a deleted or deleting EC2NodeClass",
			claims:  []v1.NodeClaim{claim("a", "web", "gone"), claim("b", "web", "leaving"), claim("c", "web", "default")},
			pools:   []v1.NodePool{pool("web", false)},
			classes: []v1.EC2NodeClass{class("leaving", true), class("default", false)},
			want:    []string{"a EC2NodeClass/gone", "b EC2NodeClass/leaving"},
		},
		{
			name:   "should leave alone NodeClaims already being deleted and those without a NodePool label",
			claims: []v1.NodeClaim{claim("a", "web", "default", deleting), claim("b", "", "default")},
		},
		{
			name:    "should delete nothing while every owner exists",
			claims:  []v1.NodeClaim{claim("a", "web", "default")},
			pools:   []v1.NodePool{pool("web", false)},
			classes: []v1.EC2NodeClass{class("default", false)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, d := range disruption.OwnerDeleted(tt.claims, tt.pools, tt.classes) {
				got = append(got, d.NodeClaim+" "+d.Owner)
				if d.Reason == "" {
					t.Errorf("%s: no reason", d.NodeClaim)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("OwnerDeleted() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
