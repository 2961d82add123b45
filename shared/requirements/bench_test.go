package requirements_test

import (
	"fmt"
	"testing"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// Benchmarks model the solver's hot loops: a pod's requirements checked
// against a NodeClaim whose instance-type requirement lists hundreds of
// types, and a NodeClaim's requirements checked against each instance
// type's labels.

// instanceTypeNames returns n distinct instance-type names.
func instanceTypeNames(n int) []string {
	families := []string{"c5", "c6i", "c7i", "m5", "m6i", "m7i", "r5", "r6i", "r7i", "t3"}
	sizes := []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"}
	var out []string
	for i := 0; len(out) < n; i++ {
		out = append(out, fmt.Sprintf("%s%d.%s", families[i%len(families)], i/len(families)/len(sizes), sizes[(i/len(families))%len(sizes)]))
	}
	return out
}

// nodeClaimRequirements is a NodePool template after the solver has added
// the instance types it may launch.
func nodeClaimRequirements(types int) requirements.Requirements {
	return requirements.NewRequirements(
		requirements.New(v1.LabelNodePool, in, "default"),
		requirements.New(v1.LabelCapacityType, in, "on-demand", "spot"),
		requirements.New(v1.LabelArch, in, "amd64"),
		requirements.New(v1.LabelOS, in, "linux"),
		requirements.New(v1.LabelTopologyZone, in, "us-east-1a", "us-east-1b", "us-east-1c"),
		requirements.New(category, in, "c", "m", "r"),
		requirements.New(v1.LabelInstanceGeneration, gt, "4"),
		requirements.New(v1.LabelInstanceType, in, instanceTypeNames(types)...),
		requirements.New("team", in, "checkout"),
	)
}

func podRequirements() requirements.Requirements {
	return requirements.NewRequirements(
		requirements.New(v1.LabelTopologyZone, in, "us-east-1b"),
		requirements.New(v1.LabelArch, in, "amd64"),
		requirements.New(v1.LabelInstanceType, in, "m50.large", "c50.xlarge"),
		requirements.New("team", in, "checkout"),
	)
}

func BenchmarkIntersects(b *testing.B) {
	for _, types := range []int{10, 600} {
		nc, pod := nodeClaimRequirements(types), podRequirements()
		b.Run(fmt.Sprintf("compatible/%d-types", types), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := nc.Intersects(pod); err != nil {
					b.Fatal(err)
				}
			}
		})
		conflicting := podRequirements()
		conflicting.Add(requirements.New(v1.LabelArch, in, "arm64"))
		b.Run(fmt.Sprintf("conflict/%d-types", types), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := nc.Intersects(conflicting); err == nil {
					b.Fatal("want a conflict")
				}
			}
		})
	}
}

func BenchmarkCompatible(b *testing.B) {
	nc, pod := nodeClaimRequirements(600), podRequirements()
	b.Run("compatible", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := nc.Compatible(pod); err != nil {
				b.Fatal(err)
			}
		}
	})
	undefined := podRequirements()
	undefined.Add(requirements.New("tier", in, "gold"))
	b.Run("undefined-custom-label", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := nc.Compatible(undefined); err == nil {
				b.Fatal("want an error")
			}
		}
	})
}

func BenchmarkAdmitsLabels(b *testing.B) {
	nc := nodeClaimRequirements(600)
	labels := map[string]string{
		v1.LabelInstanceType: "m50.large", v1.LabelArch: "amd64", v1.LabelOS: "linux",
		category: "m", v1.LabelInstanceFamily: "m5", v1.LabelInstanceGeneration: "5", cpu: "2",
		v1.LabelInstanceMemory: "8192",
	}
	b.Run("admitted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !nc.AdmitsLabels(labels, instanceKeys) {
				b.Fatal("want admitted")
			}
		}
	})
	gpu := nodeClaimRequirements(600)
	gpu.Add(requirements.New(v1.LabelInstanceGPUCount, exist))
	b.Run("rejected", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if gpu.AdmitsLabels(labels, instanceKeys) {
				b.Fatal("want rejected")
			}
		}
	})
}

// BenchmarkAddPod is the solver's "try this pod on this NodeClaim" step:
// copy the NodeClaim's requirements and intersect the pod's into them.
func BenchmarkAddPod(b *testing.B) {
	nc, pod := nodeClaimRequirements(600), podRequirements()
	podReqs := make([]*requirements.Requirement, 0, len(pod))
	for _, k := range pod.Keys() {
		podReqs = append(podReqs, pod[k])
	}
	b.ReportAllocs()
	for b.Loop() {
		next := make(requirements.Requirements, len(nc)+len(pod))
		for k, r := range nc {
			next[k] = r
		}
		next.Add(podReqs...)
	}
}

func BenchmarkHas(b *testing.B) {
	for _, n := range []int{3, 600} {
		r := requirements.New(v1.LabelInstanceType, in, instanceTypeNames(n)...)
		b.Run(fmt.Sprintf("%d-values", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r.Has("z9.metal") {
					b.Fatal("unexpected value")
				}
			}
		})
	}
	bounded := requirements.New(cpu, gt, "4")
	b.Run("bounds", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !bounded.Has("16") {
				b.Fatal("want 16")
			}
		}
	})
}
