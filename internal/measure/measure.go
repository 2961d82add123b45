// Package measure reports what a benchmark's work costs beside time/op,
// for figures compared against a Lambda's or a pod's limits: the peak live
// heap and the process's CPU time.
package measure

import (
	"runtime/metrics"
	"sync"
	"syscall"
	"time"
)

// liveHeap is the runtime metric sampled: the heap bytes the last garbage
// collection found reachable (everything live, inputs included).
const liveHeap = "/gc/heap/live:bytes"

// LiveHeap samples the live heap every millisecond until the returned stop
// function is called; stop returns the largest sample in bytes. The peak
// is the live heap after a collection, so it is a lower bound of the
// resident heap (which also holds garbage not yet collected, up to GOGC
// percent more) and does not depend on when collections ran.
func LiveHeap() (stop func() uint64) {
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

// CPU measures the CPU time (user and system) the whole process spends
// until the returned stop function is called. On a loaded machine it is
// a steadier figure than wall time: it counts only the work done.
func CPU() (stop func() time.Duration) {
	start := cpuTime()
	return func() time.Duration { return cpuTime() - start }
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
