package v1_test

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// bigBatch is a PodBatch body of about size bytes (pods with requests and a
// label, as the forwarder sends them); with bad set, the last pod's
// container name is a number instead of a string: one wrongly typed leaf.
func bigBatch(size int, bad bool) []byte { return bigBatchWith(size, bad, `17`) }

// bigBatchWith is bigBatch whose bad pod's container name is badName.
func bigBatchWith(size int, bad bool, badName string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":"nodewright.dev/v1","kind":"PodBatch","id":"pb-1","cluster":"prod","createdAt":"2030-01-02T03:04:05Z","pods":[`)
	pod := func(i int, name string) string {
		return fmt.Sprintf(`{"name":"web-%d","namespace":"shop","uid":"uid-%d","creationTimestamp":"2030-01-02T03:00:00Z",`+
			`"labels":{"app":"web","pod-template-hash":"%s"},"spec":{"containers":[{"name":%s,"requests":{"cpu":"500m","memory":"1Gi"}}]}}`,
			i, i, strings.Repeat("a", 40), name)
	}
	for i := 0; b.Len() < size-600; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pod(i, `"app"`))
	}
	b.WriteByte(',')
	if bad {
		b.WriteString(pod(999999, badName))
	} else {
		b.WriteString(pod(999999, `"app"`))
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// malformedQuantity gives the last pod of body a pod overhead of "lots" CPU.
func malformedQuantity(body []byte) []byte {
	i := bytes.LastIndex(body, []byte(`"spec":{`)) + len(`"spec":{`)
	return slices.Concat(body[:i], []byte(`"overhead":{"cpu":"lots"},`), body[i:])
}

// BenchmarkDecodePodBatch compares a valid 4 MiB body (more pods than a
// batch may hold, so both are refused after decoding: the decode is what is
// measured) with the same body holding one wrongly typed leaf. Run with
// -benchmem; the ratio of B/op is what the error path costs.
func BenchmarkDecodePodBatch(b *testing.B) {
	for _, tt := range []struct {
		name string
		body []byte
	}{
		{"valid", bigBatch(v1.MaxMessageBytes-1024, false)},
		{"one wrongly typed leaf", bigBatch(v1.MaxMessageBytes-1024, true)},
		// A malformed quantity is a custom unmarshaler's error, which has no
		// offset: it takes the level-by-level walk.
		{"one malformed quantity", malformedQuantity(bigBatch(v1.MaxMessageBytes-1024, false))},
	} {
		body := tt.body
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = v1.DecodePodBatch(body)
			}
		})
	}
}

// totalAlloc returns the bytes f allocates.
func totalAlloc(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeErrorPathAllocatesNoMoreThanAValidBody bounds what a hostile
// body costs: locating one wrongly typed leaf, or one malformed quantity, in
// a 4 MiB batch may allocate at most what decoding the valid body of the
// same size does, plus 256 KiB. (A malformed quantity allocated 2.5x the
// valid body when every self-decoding leaf was decoded again with its field
// path and every object's fields were listed again; a wrongly typed leaf
// 3.3x, and 12x for deeper documents, when every level was decoded again.)
func TestDecodeErrorPathAllocatesNoMoreThanAValidBody(t *testing.T) {
	const slack = 256 << 10
	valid := bigBatch(v1.MaxMessageBytes-1024, false)
	validBytes := totalAlloc(func() { _, _, _ = v1.DecodePodBatch(valid) })
	for _, tt := range []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{"one wrongly typed leaf", bigBatch(v1.MaxMessageBytes-1024, true), "containers[0].name: expected a string, got number"},
		{"one malformed quantity", malformedQuantity(valid), "spec.overhead[cpu]: expected a quantity"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := v1.DecodePodBatch(tt.body)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("DecodePodBatch() error = %v, want the leaf's path (%q)", err, tt.wantErr)
			}
			badBytes := totalAlloc(func() { _, _, _ = v1.DecodePodBatch(tt.body) })
			if badBytes > validBytes+slack {
				t.Errorf("the error path allocated %d bytes, %.2fx the valid body's %d; want at most the valid body's + %d",
					badBytes, float64(badBytes)/float64(validBytes), validBytes, slack)
			}
		})
	}
}
