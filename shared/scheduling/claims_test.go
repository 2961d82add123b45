package scheduling

import (
	"math/rand"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
)

// TestClaimIndexStaysSorted applies random insertions, key changes (via
// pos and fix, as commit does) and removals, and compares the index with a
// sorted copy after every step.
func TestClaimIndexStaysSorted(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, slot := range []int{resCPU, byPodCount} {
		ix := claimIndex{slot: slot}
		var live []*nclaim
		for step := 0; step < 1200; step++ {
			switch op := r.Intn(10); {
			case op < 3 || len(live) == 0:
				c := &nclaim{seq: step}
				c.free[resCPU] = int64(r.Intn(50))
				c.pods = make([]int32, r.Intn(5))
				ix.insert(c)
				live = append(live, c)
			case op < 9:
				c := live[r.Intn(len(live))]
				i := ix.pos(c)
				if i < 0 {
					t.Fatalf("step %d: claim %d not found", step, c.seq)
				}
				c.free[resCPU] = int64(r.Intn(50))
				c.pods = make([]int32, r.Intn(5))
				ix.fix(c, i)
			default:
				j := r.Intn(len(live))
				ix.remove(live[j])
				live = append(live[:j], live[j+1:]...)
			}
			want := append([]*nclaim(nil), live...)
			sort.Slice(want, func(a, b int) bool {
				if ka, kb := ix.key(want[a]), ix.key(want[b]); ka != kb {
					return ka < kb
				}
				return want[a].seq < want[b].seq
			})
			if diff := cmp.Diff(seqs(want), seqs(ix.list)); diff != "" {
				t.Fatalf("slot %d step %d: index out of order (-want +got):\n%s", slot, step, diff)
			}
		}
	}
}

func seqs(cs []*nclaim) []int {
	out := make([]int, len(cs))
	for i, c := range cs {
		out[i] = c.seq
	}
	return out
}

func TestTruncateKeepsMinValues(t *testing.T) {
	mk := func(name, family string) *ptype {
		return &ptype{name: name, it: catalogType(name, family)}
	}
	types := []*ptype{mk("a.1", "a"), mk("a.2", "a"), mk("a.3", "a"), mk("b.1", "b"), mk("c.1", "c")}
	mv := 3
	fam := requirements.New("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpExists)
	fam.MinValues = &mv
	r := requirements.NewRequirements(fam)
	tests := []struct {
		name string
		r    requirements.Requirements
		max  int
		want []string
	}{
		{name: "should keep the cheapest without minValues", r: requirements.Requirements{}, max: 3, want: []string{"a.1", "a.2", "a.3"}},
		{name: "should swap in types that bring missing values, in price order", r: r, max: 3, want: []string{"a.1", "b.1", "c.1"}},
		{name: "should fill the rest by price", r: r, max: 4, want: []string{"a.1", "a.2", "b.1", "c.1"}},
		{name: "should keep everything under the cap", r: r, max: 10, want: []string{"a.1", "a.2", "a.3", "b.1", "c.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range truncate(tt.r, types, tt.max) {
				got = append(got, p.name)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("truncate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func catalogType(name, family string) *catalog.InstanceType {
	return &catalog.InstanceType{Name: name, Labels: map[string]string{
		"node.kubernetes.io/instance-type": name, "karpenter.k8s.aws/instance-family": family}}
}
