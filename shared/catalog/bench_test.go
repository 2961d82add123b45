package catalog_test

import (
	"encoding/json"
	"os"
	"testing"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// BenchmarkResolve is the whole cost a Lambda cold start or a `nodewright
// plan` pays for the catalog: the table is compiled in, so there is no
// parsing step before this.
func BenchmarkResolve(b *testing.B) {
	for _, bc := range []struct {
		name string
		nc   *v1.EC2NodeClass
		opts catalog.Options
	}{
		{name: "AL2023 on-demand 6 zones", nc: nodeClass(), opts: catalog.Options{Region: "us-east-1"}},
		{name: "AL2023 on-demand+spot 3 subnets", nc: nodeClass(subnets("us-east-1a", "us-east-1b", "us-east-1c")),
			opts: catalog.Options{Region: "us-east-1", SpotPriceRatio: 0.3}},
		{name: "Windows2022 kubelet overrides", nc: nodeClass(alias("windows2022@latest"), kubelet(func(kc *v1.KubeletConfiguration) {
			kc.KubeReserved = map[string]string{"cpu": "150m"}
			kc.EvictionHard = map[string]string{"memory.available": "5%"}
		})), opts: catalog.Options{Region: "us-east-1"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := catalog.Resolve(bc.nc, bc.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeCatalogJSON measures what parsing the JSON at start-up
// would cost (encoding/json into typed records), the cost the compiled
// table avoids.
func BenchmarkDecodeCatalogJSON(b *testing.B) {
	raw, err := os.ReadFile("data/ec2-instance-types.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var recs []struct {
			Name      string            `json:"name"`
			Resources map[string]string `json:"resources"`
			Labels    map[string]string `json:"labels"`
		}
		if err := json.Unmarshal(raw, &recs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAllocatable(b *testing.B) {
	its, _, err := catalog.Resolve(nodeClass(), catalog.Options{Region: "us-east-1"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ResourceList", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = its[i%len(its)].Allocatable()
		}
	})
	b.Run("Vector", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_ = its[i%len(its)].AllocatableVector()
		}
	})
}

func BenchmarkCheapestAvailable(b *testing.B) {
	its, _, err := catalog.Resolve(nodeClass(), catalog.Options{Region: "us-east-1", SpotPriceRatio: 0.3})
	if err != nil {
		b.Fatal(err)
	}
	zone := func(z string) bool { return z != "us-east-1a" }
	onDemand := func(ct string) bool { return ct == v1.CapacityTypeOnDemand }
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_, _ = its[i%len(its)].Offerings.CheapestAvailable(zone, onDemand)
	}
}
