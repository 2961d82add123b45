package requirements

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSortedSetOperations(t *testing.T) {
	big := make([]string, 0, 40)
	for i := range 40 {
		big = append(big, fmt.Sprintf("v%02d", i))
	}
	tests := []struct {
		name string
		op   func(a, b []string) []string
		a, b []string
		want []string
	}{
		{name: "intersect merges", op: intersect, a: []string{"a", "b", "c"}, b: []string{"b", "c", "d"}, want: []string{"b", "c"}},
		{name: "intersect probes a much larger set", op: intersect, a: []string{"v03", "v39", "x"}, b: big, want: []string{"v03", "v39"}},
		{name: "intersect of disjoint sets is empty", op: intersect, a: []string{"a"}, b: []string{"b"}, want: nil},
		{name: "difference merges", op: difference, a: []string{"a", "b", "c"}, b: []string{"b", "d"}, want: []string{"a", "c"}},
		{name: "difference probes a much larger set", op: difference, a: []string{"a", "v05", "z"}, b: big, want: []string{"a", "z"}},
		{name: "difference removing nothing returns the first set", op: difference, a: []string{"a", "c"}, b: []string{"b"}, want: []string{"a", "c"}},
		{name: "difference removing everything is empty", op: difference, a: []string{"a"}, b: []string{"a"}, want: []string{}},
		{name: "union merges", op: union, a: []string{"a", "c"}, b: []string{"b", "c", "d"}, want: []string{"a", "b", "c", "d"}},
		{name: "union with an empty set is the other set", op: union, a: nil, b: []string{"b"}, want: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.op(tt.a, tt.b)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkMembership compares the sorted-slice set with a map set for the
// sizes requirements hold: a few zones or categories, and hundreds of
// instance types.
func BenchmarkMembership(b *testing.B) {
	for _, n := range []int{3, 8, 60, 600} {
		values := make([]string, 0, n)
		set := make(map[string]struct{}, n)
		for i := range n {
			v := fmt.Sprintf("m%d.%dxlarge", i%7, i)
			values = append(values, v)
			set[v] = struct{}{}
		}
		values = sortedSet(values)
		probe := values[len(values)/2]
		b.Run(fmt.Sprintf("sorted-slice/%d", n), func(b *testing.B) {
			for b.Loop() {
				if !contains(values, probe) {
					b.Fatal("missing")
				}
			}
		})
		b.Run(fmt.Sprintf("map/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, ok := set[probe]; !ok {
					b.Fatal("missing")
				}
			}
		})
	}
}
