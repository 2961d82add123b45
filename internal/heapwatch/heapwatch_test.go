package heapwatch_test

import (
	"runtime"
	"testing"

	"github.com/nodewright/nodewright/internal/heapwatch"
)

// The peak covers memory held live across a collection, and is not lost
// once the memory is released.
func TestStartReportsHeldMemory(t *testing.T) {
	const size = 64 << 20
	stop := heapwatch.Start()
	held := make([]byte, size)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC() // the live heap is measured at collections
	runtime.KeepAlive(held)
	held = nil
	runtime.GC()
	if peak := stop(); peak < size {
		t.Errorf("peak live heap = %d bytes, want at least the %d held", peak, size)
	}
}
