package nodewright

import (
	"testing"
	"time"
)

// measurement is what one invocation of a Lambda costs at the scale
// nodewright is sized for (5,000 nodes, 100,000 pods, a full batch of
// 4,000 pending pods), from the Go benchmarks beside the runtime code
// (shared/disruption/BENCHMARKS.md lists the runs). cpuSeconds is the
// process's CPU time (cpu-s/op): a loaded benchmark machine's wall time
// says more about its load than about the work. liveMiB is the peak live
// heap, inputs included.
type measurement struct {
	benchmarks []string
	cpuSeconds float64
	liveMiB    float64
}

// measured holds the work of the Lambdas whose cost grows with the cluster.
var measured = map[string]measurement{
	// One evaluation: read the snapshot (DynamoDB is kumo in process, so
	// the server's work and copy are included), list the NodeClaims, and
	// evaluate a packed 5,000-node cluster in which every node is
	// simulated; the three live heaps are added as if all were live at
	// once.
	"disruption": {
		benchmarks: []string{
			"shared/aws/ddbstore BenchmarkSnapshotAtScale/current/nodes=5000/pods=100000",
			"shared/aws/ddbstore BenchmarkListNodeClaims/claims=5000",
			"shared/disruption BenchmarkEvaluateRealistic/packed/nodes=5000",
		},
		cpuSeconds: 1.58 + 0.36 + 5.08,
		liveMiB:    215 + 40 + 242,
	},
	// The intake stores one part per invocation; the figures are for all
	// 11 parts of the 5,000-node snapshot, building them included.
	"intake": {
		benchmarks: []string{"shared/aws/ddbstore BenchmarkSnapshotAtScale/put/nodes=5000/pods=100000"},
		cpuSeconds: 2.36,
		liveMiB:    161,
	},
	// One full batch against 5,000 registered nodes.
	"provisioner": {
		benchmarks: []string{"shared/provisioning BenchmarkProvisionAtScale/pods=4000/nodes=5000"},
		cpuSeconds: 0.50,
		liveMiB:    94,
	},
}

// oneVCPUMiB is the memory at which Lambda allocates a full vCPU; below
// it the CPU share is proportional to memory (AWS Lambda developer guide,
// "Configuring function memory").
const oneVCPUMiB = 1769

// Every sized Lambda has room for its measured work: a timeout of twice
// the CPU time at the function's CPU share (retries and DynamoDB latency
// come on top), and memory for twice the live heap (Go lets the heap grow
// to twice what is live at GOGC=100) plus 128 MiB for the runtime, the
// binary and the SDK clients.
func TestLambdaSizingCoversMeasuredWork(t *testing.T) {
	const runtimeMiB = 128
	for name, m := range measured {
		var spec *functionSpec
		for i := range functions {
			if functions[i].name == name {
				spec = &functions[i]
			}
		}
		if spec == nil {
			t.Errorf("measured function %q has no row in functions", name)
			continue
		}
		share := min(1, float64(spec.memoryMiB)/oneVCPUMiB)
		if want := time.Duration(2 * m.cpuSeconds / share * float64(time.Second)); spec.timeout < want {
			t.Errorf("%s: timeout %v, want at least %v (twice the %.2f CPU-seconds measured by %v, at %.2f vCPU)", name, spec.timeout, want.Round(time.Second), m.cpuSeconds, m.benchmarks, share)
		}
		if want := 2*m.liveMiB + runtimeMiB; float64(spec.memoryMiB) < want {
			t.Errorf("%s: memory %d MiB, want at least %.0f MiB (twice the %.0f MiB live heap measured by %v, plus %d MiB)", name, spec.memoryMiB, want, m.liveMiB, m.benchmarks, runtimeMiB)
		}
	}
}
