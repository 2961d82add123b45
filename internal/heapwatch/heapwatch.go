// Package heapwatch measures the peak live heap of a piece of work, for
// benchmarks that report memory against a Lambda's or a pod's limit.
package heapwatch

import (
	"runtime/metrics"
	"sync"
	"time"
)

// liveHeap is the runtime metric sampled: the heap bytes the last garbage
// collection found reachable (everything live, inputs included).
const liveHeap = "/gc/heap/live:bytes"

// Start samples the live heap every millisecond until the returned stop
// function is called; stop returns the largest sample in bytes. The peak
// is the live heap after a collection, so it is a lower bound of the
// resident heap (which also holds garbage not yet collected, up to GOGC
// percent more) and does not depend on when collections ran.
func Start() (stop func() uint64) {
	sample := []metrics.Sample{{Name: liveHeap}}
	var (
		mu   sync.Mutex
		peak uint64
	)
	read := func() {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				read()
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		read()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
