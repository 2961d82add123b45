package catalog

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// dataRecord decodes data/ec2-instance-types.json independently of gen.go.
type dataRecord struct {
	Name                    string            `json:"name"`
	Category                string            `json:"category"`
	Family                  string            `json:"family"`
	Generation              int64             `json:"generation"`
	Size                    string            `json:"size"`
	Arch                    string            `json:"arch"`
	OS                      string            `json:"os"`
	VCPU                    int64             `json:"vcpu"`
	MemoryMiB               int64             `json:"memoryMiB"`
	CPUManufacturer         string            `json:"cpuManufacturer"`
	ClockMHz                int64             `json:"cpuSustainedClockSpeedMHz"`
	CapabilityFlex          bool              `json:"capabilityFlex"`
	GPUCount                *int64            `json:"gpuCount"`
	GPUName                 *string           `json:"gpuName"`
	GPUManufacturer         *string           `json:"gpuManufacturer"`
	GPUMemoryMiB            *int64            `json:"gpuMemoryMiB"`
	AcceleratorCount        *int64            `json:"acceleratorCount"`
	AcceleratorName         *string           `json:"acceleratorName"`
	AcceleratorManufacturer *string           `json:"acceleratorManufacturer"`
	LocalNVMeGB             *int64            `json:"localNVMeGB"`
	NetworkBandwidthMbps    *int64            `json:"networkBandwidthMbps"`
	EBSBandwidthMbps        *int64            `json:"ebsBandwidthMbps"`
	Hypervisor              string            `json:"hypervisor"`
	BareMetal               bool              `json:"bareMetal"`
	EncryptionInTransit     bool              `json:"encryptionInTransit"`
	MaxPods                 int64             `json:"maxPods"`
	MaxENIs                 *int64            `json:"maxENIs"`
	DefaultCardMaxENIs      *int64            `json:"defaultCardMaxENIs"`
	IPv4PerENI              *int64            `json:"ipv4PerENI"`
	BranchENIs              *int64            `json:"branchENIs"`
	TrunkingCompatible      *bool             `json:"trunkingCompatible"`
	NetworkCards            *int64            `json:"networkCards"`
	Resources               map[string]string `json:"resources"`
	Labels                  map[string]string `json:"labels"`
}

type dataPrices struct {
	Currency    map[string]string             `json:"currency"`
	GeneratedAt map[string]string             `json:"generatedAt"`
	SourceFile  map[string]string             `json:"sourceFile"`
	Regions     map[string]map[string]float64 `json:"regions"`
}

func readDataRecords(t testing.TB) []dataRecord {
	t.Helper()
	raw, err := os.ReadFile("data/ec2-instance-types.json")
	if err != nil {
		t.Fatalf("read catalog: %v", err)
	}
	var recs []dataRecord
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatalf("decode catalog: %v", err)
	}
	return recs
}

func readDataPrices(t testing.TB) dataPrices {
	t.Helper()
	raw, err := os.ReadFile("data/ec2-on-demand-prices.json")
	if err != nil {
		t.Fatalf("read prices: %v", err)
	}
	var p dataPrices
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("decode prices: %v", err)
	}
	return p
}

func orAbsent(p *int64) int64 {
	if p == nil {
		return absent
	}
	return *p
}

func orEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func countOf(t *testing.T, resources map[string]string, key string) int64 {
	t.Helper()
	s, ok := resources[key]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("resource %s %q: %v", key, s, err)
	}
	return n
}

// The compiled table must be exactly the JSON: a stale zz_generated.go (data
// changed without `go generate`) fails here.
func TestGeneratedTableMatchesData(t *testing.T) {
	recs := readDataRecords(t)
	if len(recs) != 1363 {
		t.Errorf("data records = %d, want 1363 (data/README.md)", len(recs))
	}
	want := make([]typeInfo, len(recs))
	for i, r := range recs {
		want[i] = typeInfo{
			name: r.Name, category: r.Category, family: r.Family, generation: r.Generation, size: r.Size, arch: r.Arch,
			vcpu: r.VCPU, memoryMiB: r.MemoryMiB, cpuManufacturer: r.CPUManufacturer, clockMHz: r.ClockMHz, flex: r.CapabilityFlex,
			gpuCount: orAbsent(r.GPUCount), gpuName: orEmpty(r.GPUName), gpuMfr: orEmpty(r.GPUManufacturer), gpuMemoryMiB: orAbsent(r.GPUMemoryMiB),
			acceleratorCount: orAbsent(r.AcceleratorCount), acceleratorName: orEmpty(r.AcceleratorName), accMfr: orEmpty(r.AcceleratorManufacturer),
			localNVMeGB: orAbsent(r.LocalNVMeGB), networkBandwidthMbps: orAbsent(r.NetworkBandwidthMbps), ebsBandwidthMbps: orAbsent(r.EBSBandwidthMbps),
			hypervisor: r.Hypervisor, bareMetal: r.BareMetal, encryptionInTransit: r.EncryptionInTransit, maxPods: r.MaxPods,
			maxENIs: orAbsent(r.MaxENIs), defaultCardMaxENIs: orAbsent(r.DefaultCardMaxENIs), ipv4PerENI: orAbsent(r.IPv4PerENI),
			branchENIs: orAbsent(r.BranchENIs), trunkingCompatible: r.TrunkingCompatible != nil && *r.TrunkingCompatible,
			networkCards: orAbsent(r.NetworkCards),
			nvidiaGPU:    countOf(t, r.Resources, ResourceNVIDIAGPU), amdGPU: countOf(t, r.Resources, ResourceAMDGPU),
			neuron: countOf(t, r.Resources, ResourceAWSNeuron), neuronCore: countOf(t, r.Resources, ResourceAWSNeuronCore),
			efa: countOf(t, r.Resources, ResourceEFA),
		}
	}
	if diff := cmp.Diff(want, catalogTypes[:], cmp.AllowUnexported(typeInfo{})); diff != "" {
		t.Errorf("zz_generated.go differs from data/ec2-instance-types.json; run go generate (-json +table):\n%s", diff)
	}
}

func TestGeneratedPricesMatchData(t *testing.T) {
	p := readDataPrices(t)
	want := map[string]priceTable{}
	for region, prices := range p.Regions {
		pt := priceTable{region: region, currency: p.Currency[region], generatedAt: p.GeneratedAt[region], sourceFile: p.SourceFile[region]}
		for name, price := range prices {
			pt.prices = append(pt.prices, namedPrice{name, price})
		}
		want[region] = pt
	}
	got := map[string]priceTable{}
	for i, pt := range priceTables {
		if i > 0 && priceTables[i-1].region >= pt.region {
			t.Errorf("priceTables not sorted by region at %s", pt.region)
		}
		for j := 1; j < len(pt.prices); j++ {
			if pt.prices[j-1].name >= pt.prices[j].name {
				t.Errorf("%s prices not sorted at %s", pt.region, pt.prices[j].name)
			}
		}
		got[pt.region] = pt
	}
	sortPrices := cmp.Transformer("sortPrices", func(in []namedPrice) map[string]float64 {
		m := make(map[string]float64, len(in))
		for _, np := range in {
			m[np.name] = np.price
		}
		return m
	})
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(priceTable{}, namedPrice{}), sortPrices); diff != "" {
		t.Errorf("zz_generated.go prices differ from data/ec2-on-demand-prices.json; run go generate (-json +table):\n%s", diff)
	}
	if _, ok := lookupPriceTable(fallbackPriceRegion); !ok {
		t.Errorf("no %s price table, which Resolve falls back to", fallbackPriceRegion)
	}
}

// Labels are derived from the table's fields; for a Linux family they must
// equal the data's label table exactly (plus the region label).
func TestLabelsMatchDataForEveryType(t *testing.T) {
	recs := readDataRecords(t)
	al2023, _ := family("AL2023")
	for i := range catalogTypes {
		got := labels(&catalogTypes[i], al2023, "")
		if diff := cmp.Diff(recs[i].Labels, got); diff != "" {
			t.Errorf("%s labels (-data +got):\n%s", recs[i].Name, diff)
		}
	}
}
