package requirements_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

const (
	in    = corev1.NodeSelectorOpIn
	notIn = corev1.NodeSelectorOpNotIn
	exist = corev1.NodeSelectorOpExists
	dne   = corev1.NodeSelectorOpDoesNotExist
	gt    = corev1.NodeSelectorOpGt
	lt    = corev1.NodeSelectorOpLt
	gte   = v1.NodeSelectorOpGte
	lte   = v1.NodeSelectorOpLte
)

const (
	cpu      = v1.LabelInstanceCPU
	category = v1.LabelInstanceCategory
	maxInt   = "9223372036854775807"
	minInt   = "-9223372036854775808"
)

func intPtr(n int) *int { return &n }

// view is what a Requirement exposes, for cmp.Diff.
type view struct {
	Key      string
	Operator corev1.NodeSelectorOperator
	Values   []string
	Len      int
	Any      string
	String   string
}

func viewOf(r *requirements.Requirement) view {
	return view{Key: r.Key, Operator: r.Operator(), Values: r.Values(), Len: r.Len(), Any: r.Any(), String: r.String()}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name   string
		key    string
		op     corev1.NodeSelectorOperator
		values []string
		want   view
	}{
		{
			name: "In keeps its values sorted and deduplicated",
			key:  "team", op: in, values: []string{"b", "a", "b"},
			want: view{Key: "team", Operator: in, Values: []string{"a", "b"}, Len: 2, Any: "a", String: "team In [a b]"},
		},
		{
			name: "In without values allows nothing and reports DoesNotExist",
			key:  "team", op: in,
			want: view{Key: "team", Operator: dne, Values: []string{}, String: "team DoesNotExist"},
		},
		{
			name: "NotIn is a complement that lists no values",
			key:  "team", op: notIn, values: []string{"z", "a"},
			want: view{Key: "team", Operator: notIn, Values: []string{}, Len: math.MaxInt, String: "team NotIn [a z]"},
		},
		{
			name: "NotIn without values is Exists",
			key:  "team", op: notIn,
			want: view{Key: "team", Operator: exist, Values: []string{}, Len: math.MaxInt, String: "team Exists"},
		},
		{
			name: "Exists ignores values",
			key:  "team", op: exist, values: []string{"a"},
			want: view{Key: "team", Operator: exist, Values: []string{}, Len: math.MaxInt, String: "team Exists"},
		},
		{
			name: "DoesNotExist ignores values",
			key:  "team", op: dne, values: []string{"a"},
			want: view{Key: "team", Operator: dne, Values: []string{}, String: "team DoesNotExist"},
		},
		{
			name: "Gt N becomes Gte N+1",
			key:  cpu, op: gt, values: []string{"4"},
			want: view{Key: cpu, Operator: exist, Values: []string{}, Len: math.MaxInt, Any: "5", String: cpu + " Exists >=5"},
		},
		{
			name: "Lt N becomes Lte N-1",
			key:  cpu, op: lt, values: []string{"4"},
			want: view{Key: cpu, Operator: exist, Values: []string{}, Len: math.MaxInt, Any: "3", String: cpu + " Exists <=3"},
		},
		{
			name: "Gte is inclusive",
			key:  cpu, op: gte, values: []string{"4"},
			want: view{Key: cpu, Operator: exist, Values: []string{}, Len: math.MaxInt, Any: "4", String: cpu + " Exists >=4"},
		},
		{
			name: "Lte is inclusive",
			key:  cpu, op: lte, values: []string{"-4"},
			want: view{Key: cpu, Operator: exist, Values: []string{}, Len: math.MaxInt, Any: "-4", String: cpu + " Exists <=-4"},
		},
		{
			name: "Gt reads only its first value",
			key:  cpu, op: gt, values: []string{"1", "100"},
			want: view{Key: cpu, Operator: exist, Values: []string{}, Len: math.MaxInt, Any: "2", String: cpu + " Exists >=2"},
		},
		{
			name: "Gt MaxInt allows nothing",
			key:  cpu, op: gt, values: []string{maxInt},
			want: view{Key: cpu, Operator: dne, Values: []string{}, String: cpu + " DoesNotExist"},
		},
		{
			name: "Lt MinInt allows nothing",
			key:  cpu, op: lt, values: []string{minInt},
			want: view{Key: cpu, Operator: dne, Values: []string{}, String: cpu + " DoesNotExist"},
		},
		{
			name: "Gte MaxInt allows only MaxInt",
			key:  cpu, op: gte, values: []string{maxInt},
			want: view{Key: cpu, Operator: exist, Values: []string{}, Len: math.MaxInt, Any: maxInt, String: cpu + " Exists >=" + maxInt},
		},
		{
			name: "a non-integer bound allows nothing",
			key:  cpu, op: gt, values: []string{"four"},
			want: view{Key: cpu, Operator: dne, Values: []string{}, String: cpu + " DoesNotExist"},
		},
		{
			name: "a bound without a value allows nothing",
			key:  cpu, op: lt,
			want: view{Key: cpu, Operator: dne, Values: []string{}, String: cpu + " DoesNotExist"},
		},
		{
			name: "an unknown operator allows nothing",
			key:  "team", op: "Near", values: []string{"a"},
			want: view{Key: "team", Operator: dne, Values: []string{}, String: "team DoesNotExist"},
		},
		{
			name: "should normalize deprecated keys",
			key:  "beta.kubernetes.io/arch", op: in, values: []string{"arm64"},
			want: view{Key: v1.LabelArch, Operator: in, Values: []string{"arm64"}, Len: 1, Any: "arm64", String: "kubernetes.io/arch In [arm64]"},
		},
		{
			name: "String lists five values and counts the others",
			key:  "k", op: in, values: []string{"g", "f", "e", "d", "c", "b", "a"},
			want: view{Key: "k", Operator: in, Values: []string{"a", "b", "c", "d", "e", "f", "g"}, Len: 7, Any: "a", String: "k In [a b c d e and 2 others]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := viewOf(requirements.New(tt.key, tt.op, tt.values...))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("New(%q, %s, %q) mismatch (-want +got):\n%s", tt.key, tt.op, tt.values, diff)
			}
		})
	}
}

func TestRequirementHas(t *testing.T) {
	tests := []struct {
		name string
		req  *requirements.Requirement
		want map[string]bool
	}{
		{
			name: "In allows exactly its values",
			req:  requirements.New("k", in, "a", "b"),
			want: map[string]bool{"a": true, "b": true, "c": false, "": false},
		},
		{
			name: "In with many values uses the sorted set",
			req:  requirements.New("k", in, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"),
			want: map[string]bool{"a": true, "k": true, "f": true, "l": false, "0": false},
		},
		{
			name: "NotIn allows everything but its values",
			req:  requirements.New("k", notIn, "a"),
			want: map[string]bool{"a": false, "b": true, "": true},
		},
		{
			name: "Exists allows any value",
			req:  requirements.New("k", exist),
			want: map[string]bool{"a": true, "": true},
		},
		{
			name: "DoesNotExist allows no value",
			req:  requirements.New("k", dne),
			want: map[string]bool{"a": false, "": false},
		},
		{
			name: "Gt excludes its bound",
			req:  requirements.New(cpu, gt, "4"),
			want: map[string]bool{"4": false, "5": true, "64": true, "3": false},
		},
		{
			name: "Lt excludes its bound",
			req:  requirements.New(cpu, lt, "4"),
			want: map[string]bool{"4": false, "3": true, "-10": true},
		},
		{
			name: "Gte and Lte include their bound",
			req:  requirements.New(cpu, gte, "4").Intersection(requirements.New(cpu, lte, "8")),
			want: map[string]bool{"3": false, "4": true, "8": true, "9": false},
		},
		{
			name: "non-integer values never satisfy bounds",
			req:  requirements.New(cpu, gt, "0"),
			want: map[string]bool{"large": false, "1.5": false, "": false, "1e3": false},
		},
		{
			name: "bounds accept any base-10 spelling of an integer",
			req:  requirements.New(cpu, gt, "4"),
			want: map[string]bool{"05": true, "+5": true, "-5": false},
		},
		{
			name: "values beyond int64 never satisfy bounds",
			req:  requirements.New(cpu, gt, "0"),
			want: map[string]bool{"9223372036854775808": false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]bool{}
			for v := range tt.want {
				got[v] = tt.req.Has(v)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s Has() mismatch (-want +got):\n%s", tt.req, diff)
			}
		})
	}
}

func TestIntersection(t *testing.T) {
	tests := []struct {
		name string
		a, b *requirements.Requirement
		want string
	}{
		// Every pair of the four set operators.
		{name: "In and In keep the common values", a: requirements.New("k", in, "a", "b", "c"), b: requirements.New("k", in, "b", "c", "d"), want: "k In [b c]"},
		{name: "In and disjoint In is DoesNotExist", a: requirements.New("k", in, "a"), b: requirements.New("k", in, "b"), want: "k DoesNotExist"},
		{name: "In and NotIn drop the excluded values", a: requirements.New("k", in, "a", "b"), b: requirements.New("k", notIn, "b", "c"), want: "k In [a]"},
		{name: "NotIn and In drop the excluded values", a: requirements.New("k", notIn, "b"), b: requirements.New("k", in, "a", "b"), want: "k In [a]"},
		{name: "In and Exists is the In", a: requirements.New("k", in, "a"), b: requirements.New("k", exist), want: "k In [a]"},
		{name: "Exists and In is the In", a: requirements.New("k", exist), b: requirements.New("k", in, "a"), want: "k In [a]"},
		{name: "In and DoesNotExist is DoesNotExist", a: requirements.New("k", in, "a"), b: requirements.New("k", dne), want: "k DoesNotExist"},
		{name: "DoesNotExist and In is DoesNotExist", a: requirements.New("k", dne), b: requirements.New("k", in, "a"), want: "k DoesNotExist"},
		{name: "NotIn and NotIn exclude the union", a: requirements.New("k", notIn, "a"), b: requirements.New("k", notIn, "c", "b"), want: "k NotIn [a b c]"},
		{name: "NotIn and Exists is the NotIn", a: requirements.New("k", notIn, "a"), b: requirements.New("k", exist), want: "k NotIn [a]"},
		{name: "Exists and NotIn is the NotIn", a: requirements.New("k", exist), b: requirements.New("k", notIn, "a"), want: "k NotIn [a]"},
		{name: "NotIn and DoesNotExist is DoesNotExist", a: requirements.New("k", notIn, "a"), b: requirements.New("k", dne), want: "k DoesNotExist"},
		{name: "Exists and Exists is Exists", a: requirements.New("k", exist), b: requirements.New("k", exist), want: "k Exists"},
		{name: "Exists and DoesNotExist is DoesNotExist", a: requirements.New("k", exist), b: requirements.New("k", dne), want: "k DoesNotExist"},
		{name: "DoesNotExist and DoesNotExist is DoesNotExist", a: requirements.New("k", dne), b: requirements.New("k", dne), want: "k DoesNotExist"},
		// Bounds.
		{name: "Gt and Lt keep both bounds", a: requirements.New(cpu, gt, "2"), b: requirements.New(cpu, lt, "16"), want: cpu + " Exists >=3 <=15"},
		{name: "two lower bounds keep the larger", a: requirements.New(cpu, gt, "2"), b: requirements.New(cpu, gte, "8"), want: cpu + " Exists >=8"},
		{name: "two upper bounds keep the smaller", a: requirements.New(cpu, lte, "2"), b: requirements.New(cpu, lt, "8"), want: cpu + " Exists <=2"},
		{name: "Gte and Lte on the same number allow that number", a: requirements.New(cpu, gte, "4"), b: requirements.New(cpu, lte, "4"), want: cpu + " Exists >=4 <=4"},
		{name: "crossing bounds are DoesNotExist", a: requirements.New(cpu, gt, "4"), b: requirements.New(cpu, lt, "5"), want: cpu + " DoesNotExist"},
		{name: "In and bounds drop out-of-bound values and the bounds", a: requirements.New(cpu, in, "2", "4", "8", "16"), b: requirements.New(cpu, gt, "2").Intersection(requirements.New(cpu, lte, "8")), want: cpu + " In [4 8]"},
		{name: "bounds and In drop out-of-bound values and the bounds", a: requirements.New(cpu, gte, "8"), b: requirements.New(cpu, in, "2", "8", "16"), want: cpu + " In [16 8]"},
		{name: "In and bounds drop non-integer values", a: requirements.New(cpu, in, "large", "4"), b: requirements.New(cpu, gt, "0"), want: cpu + " In [4]"},
		{name: "In outside the bounds is DoesNotExist", a: requirements.New(cpu, in, "1"), b: requirements.New(cpu, gt, "4"), want: cpu + " DoesNotExist"},
		{name: "NotIn and bounds keep excluded values within the bounds", a: requirements.New(cpu, notIn, "1", "6", "x"), b: requirements.New(cpu, gt, "4"), want: cpu + " NotIn [6] >=5"},
		{name: "NotIn entirely outside the bounds leaves the bounds", a: requirements.New(cpu, notIn, "1"), b: requirements.New(cpu, gt, "4"), want: cpu + " Exists >=5"},
		{name: "Exists and bounds keep the bounds", a: requirements.New(cpu, exist), b: requirements.New(cpu, lt, "4"), want: cpu + " Exists <=3"},
		{name: "DoesNotExist and bounds is DoesNotExist", a: requirements.New(cpu, dne), b: requirements.New(cpu, gt, "4"), want: cpu + " DoesNotExist"},
		{name: "Gt MaxInt and Exists is DoesNotExist", a: requirements.New(cpu, gt, maxInt), b: requirements.New(cpu, exist), want: cpu + " DoesNotExist"},
		{name: "Gt MaxInt and In is DoesNotExist", a: requirements.New(cpu, gt, maxInt), b: requirements.New(cpu, in, maxInt), want: cpu + " DoesNotExist"},
		{name: "Gte MaxInt and In MaxInt keeps MaxInt", a: requirements.New(cpu, gte, maxInt), b: requirements.New(cpu, in, maxInt, "1"), want: cpu + " In [" + maxInt + "]"},
		{name: "a non-integer bound and In is DoesNotExist", a: requirements.New(cpu, gt, "x"), b: requirements.New(cpu, in, "x", "5"), want: cpu + " DoesNotExist"},
		// minValues.
		{name: "minValues is the larger of both", a: withMin(requirements.New("k", in, "a", "b", "c"), 2), b: withMin(requirements.New("k", in, "a", "b", "c"), 3), want: "k In [a b c] minValues 3"},
		{name: "minValues survives from one side", a: requirements.New("k", exist), b: withMin(requirements.New("k", notIn, "a"), 2), want: "k NotIn [a] minValues 2"},
		{name: "minValues survives crossing bounds", a: withMin(requirements.New(cpu, gt, "8"), 2), b: requirements.New(cpu, lt, "2"), want: cpu + " DoesNotExist minValues 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.a.Intersection(tt.b).String()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(%s).Intersection(%s) mismatch (-want +got):\n%s", tt.a, tt.b, diff)
			}
		})
	}
}

func withMin(r *requirements.Requirement, n int) *requirements.Requirement {
	r.MinValues = intPtr(n)
	return r
}

func TestIntersectionLeavesOperandsUnchanged(t *testing.T) {
	a := requirements.New("k", in, "a", "b", "c")
	b := requirements.New("k", notIn, "b")
	c := requirements.New(cpu, notIn, "1", "7")
	d := requirements.New(cpu, gt, "4")
	_ = a.Intersection(b)
	_ = c.Intersection(d)
	got := []string{a.String(), b.String(), c.String(), d.String()}
	want := []string{"k In [a b c]", "k NotIn [b]", cpu + " NotIn [1 7]", cpu + " Exists >=5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operands changed (-want +got):\n%s", diff)
	}
}

func TestAny(t *testing.T) {
	tests := []struct {
		name string
		req  *requirements.Requirement
		want string
	}{
		{name: "smallest value of a finite set", req: requirements.New("k", in, "c", "b"), want: "b"},
		{name: "nothing for DoesNotExist", req: requirements.New("k", dne), want: ""},
		{name: "nothing for an unbounded complement", req: requirements.New("k", notIn, "a"), want: ""},
		{name: "lower bound when allowed", req: requirements.New(cpu, gte, "3"), want: "3"},
		{name: "smallest allowed integer above excluded values", req: requirements.New(cpu, notIn, "3", "4").Intersection(requirements.New(cpu, gte, "3")), want: "5"},
		{name: "largest allowed integer below excluded values with only an upper bound", req: requirements.New(cpu, notIn, "3").Intersection(requirements.New(cpu, lte, "3")), want: "2"},
		{name: "nothing when every integer within the bounds is excluded", req: requirements.New(cpu, notIn, "3", "4").Intersection(requirements.New(cpu, gte, "3")).Intersection(requirements.New(cpu, lte, "4")), want: ""},
		{name: "MaxInt when only MaxInt is allowed", req: requirements.New(cpu, gte, maxInt), want: maxInt},
		{name: "MinInt when only MinInt is allowed", req: requirements.New(cpu, lte, minInt), want: minInt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.req.Any()); diff != "" {
				t.Errorf("(%s).Any() mismatch (-want +got):\n%s", tt.req, diff)
			}
		})
	}
}

func TestValuesReturnsACopy(t *testing.T) {
	r := requirements.New("k", in, "a", "b")
	r.Values()[0] = "z"
	if diff := cmp.Diff([]string{"a", "b"}, r.Values()); diff != "" {
		t.Errorf("Values() after modifying a previous result (-want +got):\n%s", diff)
	}
}

func TestLenOfIntersection(t *testing.T) {
	tests := []struct {
		name string
		a, b *requirements.Requirement
		want int
	}{
		{name: "finite intersection counts its values", a: requirements.New("k", in, "a", "b"), b: requirements.New("k", in, "b", "c"), want: 1},
		{name: "complement intersection is unbounded", a: requirements.New("k", notIn, "a"), b: requirements.New("k", notIn, "b"), want: math.MaxInt},
		{name: "empty intersection has no values", a: requirements.New("k", in, "a"), b: requirements.New("k", dne), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Intersection(tt.b).Len(); got != tt.want {
				t.Errorf("(%s).Intersection(%s).Len() = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}
