package measure_test

import (
	"runtime"
	"testing"

	"github.com/nodewright/nodewright/internal/measure"
)

// The peak covers memory held live across a collection, and is not lost
// once the memory is released.
func TestLiveHeapReportsHeldMemory(t *testing.T) {
	const size = 64 << 20
	stop := measure.LiveHeap()
	held := make([]byte, size)
	for i := range held {
		held[i] = byte(i)
	}
	runtime.GC() // the live heap is measured at collections
	// held's last use: the next collection frees it.
	runtime.KeepAlive(held)
	runtime.GC()
	if peak := stop(); peak < size {
		t.Errorf("peak live heap = %d bytes, want at least the %d held", peak, size)
	}
}

// CPU time counts work done in between.
func TestCPUCountsWork(t *testing.T) {
	stop := measure.CPU()
	x := 0
	for i := 0; i < 200_000_000; i++ {
		x += i % 7
	}
	runtime.KeepAlive(x)
	if got := stop(); got <= 0 {
		t.Errorf("CPU() = %v after a busy loop, want more than 0", got)
	}
}
