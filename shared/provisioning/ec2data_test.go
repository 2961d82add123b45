package provisioning_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// liveStore is an in-memory stand-in for the stored live EC2 data.
type liveStore struct {
	data    catalog.LiveData
	readErr error
	putErr  error
	puts    []catalog.LiveData
}

func (s *liveStore) EC2Data(context.Context, time.Time) (catalog.LiveData, error) {
	if s.readErr != nil {
		return catalog.LiveData{}, s.readErr
	}
	return s.data, nil
}

func (s *liveStore) PutEC2Data(_ context.Context, d catalog.LiveData) error {
	if s.putErr != nil {
		return s.putErr
	}
	s.puts = append(s.puts, d)
	for _, p := range catalog.Parts {
		if _, ok := d.FetchedAt(p); !ok {
			continue
		}
		switch p {
		case catalog.PartInstanceTypes:
			s.data.InstanceTypes = d.InstanceTypes
		case catalog.PartOfferings:
			s.data.Offerings = d.Offerings
		case catalog.PartOnDemandPrices:
			s.data.OnDemandPrices = d.OnDemandPrices
		case catalog.PartSpotPrices:
			s.data.SpotPrices = d.SpotPrices
		}
	}
	return nil
}

// m5Live is us-east-1 as the live APIs describe it in this test: only
// m5.large, offered only in us-east-1b, with a Spot price there.
func m5Live(at time.Time) catalog.LiveData {
	return catalog.LiveData{
		Region: testRegion,
		InstanceTypes: &catalog.LiveInstanceTypes{FetchedAt: at, Types: []catalog.TypeFacts{{
			Name: "m5.large", Architecture: "x86_64", VCPUs: 2, MemoryMiB: 8192, CPUManufacturer: "Intel", SustainedClockGHz: 3.1,
			NetworkBandwidthMbps: 750, EBSBandwidthMbps: 4750, Hypervisor: "nitro", MaxENIs: 3, DefaultCardMaxENIs: 3, IPv4PerENI: 10, NetworkCards: 1,
		}}},
		Offerings:      &catalog.LiveOfferings{FetchedAt: at, Zones: map[string][]string{"m5.large": {"us-east-1b"}}},
		OnDemandPrices: &catalog.LivePrices{FetchedAt: at, Currency: "USD", Prices: map[string]float64{"m5.large": 0.096}},
		SpotPrices:     &catalog.LiveSpotPrices{FetchedAt: at, Prices: map[string]map[string]float64{"m5.large": {"us-east-1b": 0.031}}},
	}
}

func liveProvisioner(t *testing.T, e *env, src *liveStore) *provisioning.Provisioner {
	t.Helper()
	p, err := provisioning.NewProvisioner(provisioning.ProvisionerPorts{
		Claims: e.store, Config: e.config, NodeClass: e.resolver, Cluster: e.cluster,
		Offerings: e.offerings, Batches: e.store, Launcher: e.ec2, EC2Data: src,
	}, provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion, SpotPriceRatio: provisioning.FallbackSpotPriceRatio})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const spotOrOnDemand = `[{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]`

func TestProvisionReadsTheLiveEC2Data(t *testing.T) {
	e := newEnv([]v1.NodePool{nodePool(t, "default", spotOrOnDemand)}, []v1.EC2NodeClass{nodeClass(t)})
	p := liveProvisioner(t, e, &liveStore{data: m5Live(t0.Add(-time.Hour))})
	res, err := p.Provision(t.Context(), podBatch("batch-1", podSummary("a", "500m")), t0)
	if err != nil {
		t.Fatalf("Provision() error = %v", err)
	}
	if len(e.ec2.instances) != 1 {
		t.Fatalf("instances = %d, want 1", len(e.ec2.instances))
	}
	got := e.ec2.instances[0]
	if got.InstanceType != "m5.large" || got.Zone != "us-east-1b" || got.CapacityType != v1.CapacityTypeSpot {
		t.Errorf("launched %s in %s as %s, want the only live type in the only zone offering it, as spot", got.InstanceType, got.Zone, got.CapacityType)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "EC2 data") {
			t.Errorf("warning %q with fresh live data", w)
		}
	}
	if !strings.Contains(res.DataSource, "DescribeSpotPriceHistory in us-east-1, fetched") {
		t.Errorf("DataSource = %q, want it to name the live Spot prices", res.DataSource)
	}
}

func TestProvisionFallsBackToTheEmbeddedTables(t *testing.T) {
	tests := []struct {
		name        string
		src         *liveStore
		wantWarning string
	}{
		{name: "before the first refresh", src: &liveStore{data: catalog.LiveData{Region: testRegion}},
			wantWarning: "EC2 data: fallback: instance-types from embedded catalog, offerings from embedded assumption"},
		{name: "when DynamoDB cannot be read", src: &liveStore{readErr: errors.New("throttled")},
			wantWarning: "live EC2 data unreadable, embedded tables used: throttled"},
		{name: "with stale data", src: &liveStore{data: m5Live(t0.Add(-25 * time.Hour))},
			wantWarning: "EC2 data: stale: instance-types fetched 25h0m0s ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv([]v1.NodePool{nodePool(t, "default", spotOrOnDemand)}, []v1.EC2NodeClass{nodeClass(t)})
			res, err := liveProvisioner(t, e, tt.src).Provision(t.Context(), podBatch("batch-1", podSummary("a", "500m")), t0)
			if err != nil {
				t.Fatalf("Provision() error = %v", err)
			}
			if len(e.ec2.instances) != 1 {
				t.Errorf("instances = %d, want 1: the fallback still provisions", len(e.ec2.instances))
			}
			found := false
			for _, w := range res.Warnings {
				found = found || strings.HasPrefix(w, tt.wantWarning)
			}
			if !found {
				t.Errorf("Warnings = %q, want one starting %q", res.Warnings, tt.wantWarning)
			}
		})
	}
}

// fetcher is a stand-in for the live provider: it answers the parts in
// fail with their error and the rest from data.
type fetcher struct {
	data  catalog.LiveData
	fail  map[catalog.Part]error
	asked [][]catalog.Part
}

func (f *fetcher) Fetch(_ context.Context, parts []catalog.Part, now time.Time) (catalog.LiveData, error) {
	f.asked = append(f.asked, parts)
	out := catalog.LiveData{Region: f.data.Region}
	var errs []error
	for _, p := range parts {
		if err := f.fail[p]; err != nil {
			errs = append(errs, err)
			continue
		}
		switch p {
		case catalog.PartInstanceTypes:
			out.InstanceTypes = f.data.InstanceTypes
		case catalog.PartOfferings:
			out.Offerings = f.data.Offerings
		case catalog.PartOnDemandPrices:
			out.OnDemandPrices = f.data.OnDemandPrices
		case catalog.PartSpotPrices:
			out.SpotPrices = f.data.SpotPrices
		}
	}
	return out, errors.Join(errs...)
}

func TestEC2DataRefresher(t *testing.T) {
	throttled := errors.New("RequestLimitExceeded")
	tests := []struct {
		name       string
		stored     catalog.LiveData
		fail       map[catalog.Part]error
		isolated   bool
		wantAsked  [][]catalog.Part
		wantStored []catalog.Part
		wantErr    error
	}{
		{name: "should fetch every part on the first run", stored: catalog.LiveData{Region: testRegion},
			wantAsked: [][]catalog.Part{catalog.Parts}, wantStored: catalog.Parts},
		{name: "should make no call while the data is fresh", stored: m5Live(t0.Add(-11 * time.Hour))},
		{name: "should refetch data 12 hours old", stored: m5Live(t0.Add(-12 * time.Hour)),
			wantAsked: [][]catalog.Part{catalog.Parts}, wantStored: catalog.Parts},
		{name: "should store the parts that came back when one is throttled", stored: catalog.LiveData{Region: testRegion},
			fail:      map[catalog.Part]error{catalog.PartSpotPrices: throttled},
			wantAsked: [][]catalog.Part{catalog.Parts}, wantStored: []catalog.Part{catalog.PartInstanceTypes, catalog.PartOfferings, catalog.PartOnDemandPrices},
			wantErr: provisioning.ErrRefreshIncomplete},
		{name: "should never fetch on-demand prices in an isolated VPC", stored: catalog.LiveData{Region: testRegion}, isolated: true,
			wantAsked:  [][]catalog.Part{{catalog.PartInstanceTypes, catalog.PartOfferings, catalog.PartSpotPrices}},
			wantStored: []catalog.Part{catalog.PartInstanceTypes, catalog.PartOfferings, catalog.PartSpotPrices}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &liveStore{data: tt.stored}
			f := &fetcher{data: m5Live(t0), fail: tt.fail}
			r, err := provisioning.NewEC2DataRefresher(store, f, tt.isolated)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Refresh(t.Context(), t0)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Refresh() error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantAsked, f.asked); diff != "" {
				t.Errorf("parts fetched (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStored, res.Stored); diff != "" {
				t.Errorf("parts stored (-want +got):\n%s", diff)
			}
			for _, p := range tt.wantStored {
				if at, _ := store.data.FetchedAt(p); !at.Equal(t0) {
					t.Errorf("stored %s fetched at %v, want %v", p, at, t0)
				}
			}
		})
	}
	t.Run("should keep the previous copy when the store write fails", func(t *testing.T) {
		store := &liveStore{data: catalog.LiveData{Region: testRegion}, putErr: errors.New("ProvisionedThroughputExceeded")}
		r, _ := provisioning.NewEC2DataRefresher(store, &fetcher{data: m5Live(t0)}, false)
		if _, err := r.Refresh(t.Context(), t0); err == nil || !strings.Contains(err.Error(), "store: ProvisionedThroughputExceeded") {
			t.Errorf("Refresh() error = %v, want the store failure", err)
		}
	})
}

// classRecorder records each class a round resolved (the ClassStatus
// port).
type classRecorder struct{ got []v1.EC2NodeClass }

func (r *classRecorder) RecordClassStatus(_ context.Context, nc v1.EC2NodeClass) {
	r.got = append(r.got, nc)
}

func TestProvisionRecordsWhereTheClassesEC2DataCameFrom(t *testing.T) {
	withoutSpot := m5Live(t0.Add(-time.Hour))
	withoutSpot.SpotPrices = nil
	withoutOnDemand := m5Live(t0.Add(-time.Hour))
	withoutOnDemand.OnDemandPrices = nil
	tests := []struct {
		name        string
		src         *liveStore // nil: no live data wired
		isolatedVPC bool
		wantStatus  string // "": no EC2DataLive condition
		wantReason  string
		wantMessage []string
	}{
		{name: "should say Live when every part is live and fresh", src: &liveStore{data: m5Live(t0.Add(-3*time.Hour - 20*time.Minute))},
			wantStatus: "True", wantReason: v1.ConditionReasonEC2DataLive,
			wantMessage: []string{"instance-types: live, fetched " + t0.Add(-3*time.Hour-20*time.Minute).UTC().Format(time.RFC3339) + " (3h ago)", "spot-prices: live, fetched"}},
		{name: "should say AwaitingFirstRefresh before the refresher stored anything", src: &liveStore{data: catalog.LiveData{Region: testRegion}},
			wantStatus: "False", wantReason: v1.ConditionReasonEC2DataAwaitingRefresh,
			wantMessage: []string{"instance-types: embedded catalog", "offerings: embedded assumption: every type in every zone"}},
		{name: "should say Unreadable when the stored data cannot be read", src: &liveStore{readErr: errors.New("throttled")},
			wantStatus: "False", wantReason: v1.ConditionReasonEC2DataUnreadable,
			wantMessage: []string{"live EC2 data unreadable, embedded tables used: throttled"}},
		{name: "should say RefreshFailed when one part never arrived", src: &liveStore{data: withoutSpot},
			wantStatus: "False", wantReason: v1.ConditionReasonEC2DataRefreshFailed,
			wantMessage: []string{"spot-prices: on-demand price", "offerings: live, fetched"}},
		{name: "should say RefreshFailed for missing on-demand prices outside an isolated VPC", src: &liveStore{data: withoutOnDemand},
			wantStatus: "False", wantReason: v1.ConditionReasonEC2DataRefreshFailed,
			wantMessage: []string{"on-demand-prices: embedded table for us-east-1"}},
		{name: "should say IsolatedVPC for embedded on-demand prices in an isolated VPC", src: &liveStore{data: withoutOnDemand}, isolatedVPC: true,
			wantStatus: "False", wantReason: v1.ConditionReasonEC2DataIsolatedVPC,
			wantMessage: []string{"on-demand-prices: embedded table for us-east-1", "spot-prices: live"}},
		{name: "should say Stale when a part is two refreshes old", src: &liveStore{data: m5Live(t0.Add(-25 * time.Hour))},
			wantStatus: "False", wantReason: v1.ConditionReasonEC2DataStale,
			wantMessage: []string{"(25h ago, stale)"}},
		{name: "should write no condition without live data wired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv([]v1.NodePool{nodePool(t, "default", spotOrOnDemand)}, []v1.EC2NodeClass{nodeClass(t)})
			rec := &classRecorder{}
			ports := provisioning.ProvisionerPorts{
				Claims: e.store, Config: e.config, NodeClass: e.resolver, Cluster: e.cluster,
				Offerings: e.offerings, Batches: e.store, Launcher: e.ec2, ClassStatus: rec,
			}
			if tt.src != nil {
				ports.EC2Data = tt.src
			}
			p, err := provisioning.NewProvisioner(ports, provisioning.ProvisionerOptions{Cluster: testCluster, Region: testRegion,
				SpotPriceRatio: provisioning.FallbackSpotPriceRatio, IsolatedVPC: tt.isolatedVPC})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Provision(t.Context(), podBatch("batch-1", podSummary("a", "500m")), t0); err != nil {
				t.Fatalf("Provision() error = %v", err)
			}
			if len(e.ec2.instances) != 1 {
				t.Errorf("instances = %d, want 1: the condition is informational", len(e.ec2.instances))
			}
			if len(rec.got) != 1 {
				t.Fatalf("recorded %d classes, want 1", len(rec.got))
			}
			conds := rec.got[0].Status.Conditions
			if c := findCondition(conds, v1.ConditionTypeReady); c == nil || c.Status != "True" {
				t.Errorf("Ready = %+v, want True whatever the data's source", c)
			}
			c := findCondition(conds, v1.ConditionTypeEC2DataLive)
			if tt.wantStatus == "" {
				if c != nil {
					t.Errorf("EC2DataLive = %+v, want none offline", c)
				}
				return
			}
			if c == nil {
				t.Fatalf("no EC2DataLive condition in %+v", conds)
			}
			if string(c.Status) != tt.wantStatus || c.Reason != tt.wantReason {
				t.Errorf("EC2DataLive = %s/%s, want %s/%s (message %q)", c.Status, c.Reason, tt.wantStatus, tt.wantReason, c.Message)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(c.Message, m) {
					t.Errorf("EC2DataLive message %q, want it to contain %q", c.Message, m)
				}
			}
		})
	}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
