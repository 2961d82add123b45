package v1_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/manifest"
)

const seedsDir = "testdata/seeds"

// karpenterObject is what the three Karpenter kinds share.
type karpenterObject interface {
	SetDefaults()
	Validate() error
	Warnings() []v1.FieldError
}

func readSeeds(t testing.TB) []manifest.Object {
	t.Helper()
	objs, err := manifest.ReadPaths([]string{seedsDir}, nil)
	if err != nil {
		t.Fatalf("ReadPaths(%s) error = %v", seedsDir, err)
	}
	return objs
}

func TestSeedsValidate(t *testing.T) {
	objs := readSeeds(t)
	kinds := map[string]int{}
	for _, o := range objs {
		obj, ok := o.Typed.(karpenterObject)
		if !ok {
			continue
		}
		kinds[o.Kind]++
		t.Run(o.Source, func(t *testing.T) {
			obj.SetDefaults()
			if err := obj.Validate(); err != nil {
				t.Errorf("Validate() error:\n%v", err)
			}
			if w := obj.Warnings(); len(w) != 0 {
				t.Errorf("Warnings() = %v, want none", w)
			}
		})
	}
	if diff := cmp.Diff(map[string]int{"NodePool": 10, "EC2NodeClass": 7}, kinds); diff != "" {
		t.Errorf("seed kinds mismatch (-want +got):\n%s", diff)
	}
}

// TestSeedsRoundTrip checks that decoding then encoding a seed loses and
// changes nothing, compared as generic JSON.
func TestSeedsRoundTrip(t *testing.T) {
	for _, o := range readSeeds(t) {
		if _, ok := o.Typed.(karpenterObject); !ok {
			continue
		}
		t.Run(o.Source, func(t *testing.T) {
			out, err := json.Marshal(o.Typed)
			if err != nil {
				t.Fatalf("Marshal() error = %v", err)
			}
			var want, got map[string]any
			if err := json.Unmarshal(o.Raw, &want); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, quantitiesByValue); diff != "" {
				t.Errorf("round trip mismatch (-input +encoded):\n%s", diff)
			}
		})
	}
}

// quantitiesByValue compares the values of quantity fields (limits,
// volumeSize) by amount: like the Kubernetes API server, encoding writes a
// quantity in canonical form ("1000" becomes "1k").
var quantitiesByValue = cmp.FilterPath(func(p cmp.Path) bool {
	s := p.GoString()
	return strings.Contains(s, `["limits"]`) || strings.Contains(s, `["volumeSize"]`)
}, cmp.Comparer(func(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return qa.Cmp(qb) == 0
}))

// FuzzDecodeDefaultValidate feeds arbitrary bytes to the three decoders,
// then defaults, validates and re-encodes whatever decodes. Nothing may
// panic, and an object that validates must still validate, unchanged, after
// an encode/decode round trip.
func FuzzDecodeDefaultValidate(f *testing.F) {
	for _, o := range readSeeds(f) {
		f.Add(o.Raw)
	}
	f.Add([]byte(`{"spec":{"kubelet":{"maxPods":1,"x":[1]},"blockDeviceMappings":[null,{"ebs":{}}]}}`))
	f.Add([]byte(`{"spec":{"template":{"spec":{"requirements":[{"key":"a","operator":"Gt","values":["-1"],"minValues":0}]}},"disruption":{"budgets":[{"schedule":"* * * *"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if np, _, err := v1.DecodeNodePool(data); err == nil {
			checkStable(t, np, func(b []byte) (karpenterObject, error) { o, _, err := v1.DecodeNodePool(b); return o, err })
		}
		if nc, _, err := v1.DecodeEC2NodeClass(data); err == nil {
			checkStable(t, nc, func(b []byte) (karpenterObject, error) { o, _, err := v1.DecodeEC2NodeClass(b); return o, err })
		}
		if nc, _, err := v1.DecodeNodeClaim(data); err == nil {
			checkStable(t, nc, func(b []byte) (karpenterObject, error) { o, _, err := v1.DecodeNodeClaim(b); return o, err })
		}
	})
}

func checkStable(t *testing.T, obj karpenterObject, decode func([]byte) (karpenterObject, error)) {
	t.Helper()
	obj.SetDefaults()
	_ = obj.Warnings()
	if obj.Validate() != nil {
		return
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("Marshal() of a valid object error = %v", err)
	}
	again, err := decode(b)
	if err != nil {
		t.Fatalf("decode of an encoded valid object error = %v\n%s", err, b)
	}
	again.SetDefaults()
	if err := again.Validate(); err != nil {
		t.Fatalf("valid object invalid after a round trip: %v\n%s", err, b)
	}
	b2, err := json.Marshal(again)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(b), string(b2)); diff != "" {
		t.Errorf("round trip changed a valid object (-first +second):\n%s", diff)
	}
}
