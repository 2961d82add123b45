package scheduling

import (
	"math/rand"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
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
