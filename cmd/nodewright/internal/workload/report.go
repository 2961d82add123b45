package workload

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// Report is the plan as `nodewright plan` prints it. Its JSON form is the
// shape issue 3 fixes (pricePerHour, nodeClaims, existing, unschedulable),
// plus the price and zone sources and what was left out.
type Report struct {
	// PricePerHour is the sum of every new NodeClaim's expected price.
	PricePerHour float64 `json:"pricePerHour"`
	// NodeClaims are the NodeClaims to launch, in the solver's order.
	NodeClaims []ClaimReport `json:"nodeClaims"`
	// Existing lists existing nodes and in-flight NodeClaims that receive
	// pending pods, by name.
	Existing []ExistingReport `json:"existing"`
	// Unschedulable lists pods no capacity can take, by namespace/name.
	Unschedulable []UnschedulableReport `json:"unschedulable"`
	// Region is the region the catalog was resolved for.
	Region string `json:"region"`
	// PriceSource says where prices came from (one line per distinct
	// source).
	PriceSource string `json:"priceSource"`
	// Zones maps each EC2NodeClass to the zones offered and where that list
	// came from.
	Zones map[string]ZoneReport `json:"zones"`
	// PendingPods is the number of pods the plan placed or rejected.
	PendingPods int `json:"pendingPods"`
	// Ignored lists objects read but left out of the plan.
	Ignored []Note `json:"ignored"`
}

// ClaimReport is one NodeClaim to launch.
type ClaimReport struct {
	Name          string                      `json:"name"`
	NodePool      string                      `json:"nodePool"`
	NodeClass     string                      `json:"nodeClass"`
	InstanceTypes []string                    `json:"instanceTypes"`
	CapacityTypes []string                    `json:"capacityTypes"`
	Zones         []string                    `json:"zones"`
	Expected      scheduling.ExpectedOffering `json:"expected"`
	Requests      map[string]string           `json:"requests"`
	Labels        map[string]string           `json:"labels"`
	Taints        []corev1.Taint              `json:"taints"`
	Pods          []string                    `json:"pods"`
}

// ExistingReport is an existing node (or in-flight NodeClaim) and the
// pending pods placed on it.
type ExistingReport struct {
	Node string   `json:"node"`
	Pods []string `json:"pods"`
}

// UnschedulableReport is a pod the plan cannot place and why.
type UnschedulableReport struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// ZoneReport is the zone list of one EC2NodeClass and its source.
type ZoneReport struct {
	Source string   `json:"source"`
	Zones  []string `json:"zones"`
}

// NewReport renders res for in. Pod UIDs become namespace/name; a claim
// without a name is called <nodepool>-<n> (n counting from 1 per pool);
// capacity types and zones come from the claim's requirements, or else
// from the available offerings of its candidates.
func NewReport(in scheduling.Input, res scheduling.Result) Report {
	names := map[string]string{}
	for _, p := range in.Pods {
		names[string(p.UID)] = p.Namespace + "/" + p.Name
	}
	podName := func(uid string) string {
		if n, ok := names[uid]; ok {
			return n
		}
		return uid
	}
	types := map[string]map[string]*catalog.InstanceType{}
	for class, list := range in.InstanceTypes {
		types[class] = map[string]*catalog.InstanceType{}
		for _, it := range list {
			types[class][it.Name] = it
		}
	}
	r := Report{
		NodeClaims: []ClaimReport{}, Existing: []ExistingReport{}, Unschedulable: []UnschedulableReport{},
		PendingPods: len(in.Pods), Ignored: []Note{}, Zones: map[string]ZoneReport{},
	}
	perPool := map[string]int{}
	for _, c := range res.NewClaims {
		perPool[c.NodePool]++
		cr := ClaimReport{
			Name: c.NodeClaim.Name, NodePool: c.NodePool, NodeClass: c.NodeClass,
			InstanceTypes: nonNil(c.InstanceTypes), Expected: c.Expected,
			Requests: map[string]string{}, Labels: map[string]string{}, Taints: []corev1.Taint{}, Pods: []string{},
		}
		if cr.Name == "" {
			cr.Name = fmt.Sprintf("%s-%d", c.NodePool, perPool[c.NodePool])
		}
		// Prices are per instance-hour with at most 6 decimals; the spot
		// estimate (on-demand x ratio) adds float noise that must not reach
		// the output (0.13248549999999998).
		cr.Expected.PricePerHour = roundPrice(cr.Expected.PricePerHour)
		for k, q := range c.NodeClaim.Spec.Resources.Requests {
			cr.Requests[string(k)] = q.String()
		}
		for k, v := range c.NodeClaim.Labels {
			cr.Labels[k] = v
		}
		cr.Taints = append(cr.Taints, c.NodeClaim.Spec.Taints...)
		for _, uid := range c.Pods {
			cr.Pods = append(cr.Pods, podName(uid))
		}
		cr.CapacityTypes, cr.Zones = offered(c, types[c.NodeClass])
		r.NodeClaims = append(r.NodeClaims, cr)
		r.PricePerHour += c.Expected.PricePerHour
	}
	// Prices are per instance-hour with at most 4-6 significant decimals;
	// round the sum so float addition noise (0.45899999999999996) never
	// reaches the output.
	r.PricePerHour = roundPrice(r.PricePerHour)
	byNode := map[string][]string{}
	for uid, node := range res.Placements {
		byNode[node] = append(byNode[node], podName(uid))
	}
	for node, pods := range byNode {
		sort.Strings(pods)
		r.Existing = append(r.Existing, ExistingReport{Node: node, Pods: pods})
	}
	slices.SortFunc(r.Existing, func(a, b ExistingReport) int { return cmp.Compare(a.Node, b.Node) })
	for uid, reason := range res.Unschedulable {
		r.Unschedulable = append(r.Unschedulable, UnschedulableReport{Pod: podName(uid), Reason: reason})
	}
	slices.SortFunc(r.Unschedulable, func(a, b UnschedulableReport) int { return cmp.Compare(a.Pod, b.Pod) })
	return r
}

// offered returns the capacity types and zones a claim may launch in.
func offered(c scheduling.NewClaim, types map[string]*catalog.InstanceType) (capacityTypes, zones []string) {
	for _, req := range c.NodeClaim.Spec.Requirements {
		if req.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		switch req.Key {
		case v1.LabelCapacityType:
			capacityTypes = slices.Clone(req.Values)
		case v1.LabelTopologyZone:
			zones = slices.Clone(req.Values)
		}
	}
	if capacityTypes != nil && zones != nil {
		return sorted(capacityTypes), sorted(zones)
	}
	cts, zs := map[string]bool{}, map[string]bool{}
	for _, name := range c.InstanceTypes {
		it := types[name]
		if it == nil {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || (zones != nil && !slices.Contains(zones, o.Zone)) ||
				(capacityTypes != nil && !slices.Contains(capacityTypes, o.CapacityType)) {
				continue
			}
			cts[o.CapacityType], zs[o.Zone] = true, true
		}
	}
	if capacityTypes == nil {
		capacityTypes = keys(cts)
	}
	if zones == nil {
		zones = keys(zs)
	}
	return sorted(capacityTypes), sorted(zones)
}

// WriteTable writes the report for people: the NodeClaims with pool,
// expected instance type, zone, capacity type, price and pod count; the
// existing placements; the unschedulable pods with reasons; then the total
// and the price and zone sources.
func (r Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NODECLAIM\tNODEPOOL\tINSTANCE TYPE\tZONE\tCAPACITY\t$/HOUR\tPODS\tCANDIDATES\n")
	for _, c := range r.NodeClaims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.4f\t%d\t%d\n", c.Name, c.NodePool, c.Expected.InstanceType,
			c.Expected.Zone, c.Expected.CapacityType, c.Expected.PricePerHour, len(c.Pods), len(c.InstanceTypes))
	}
	if len(r.NodeClaims) == 0 {
		fmt.Fprintf(tw, "(none)\n")
	}
	tw.Flush()
	if len(r.Existing) > 0 {
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "\nEXISTING NODE\tPODS\tPLACED\n")
		for _, e := range r.Existing {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", e.Node, len(e.Pods), abbreviate(e.Pods, 5))
		}
		tw.Flush()
	}
	if len(r.Unschedulable) > 0 {
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "\nUNSCHEDULABLE POD\tREASON\n")
		for _, u := range r.Unschedulable {
			fmt.Fprintf(tw, "%s\t%s\n", u.Pod, strings.ReplaceAll(u.Reason, "\n", "; "))
		}
		tw.Flush()
	}
	placed := r.PendingPods - len(r.Unschedulable)
	fmt.Fprintf(&b, "\nTotal: $%.4f per hour for %d new NodeClaim(s); %d of %d pending pod(s) placed, %d unschedulable.\n",
		r.PricePerHour, len(r.NodeClaims), placed, r.PendingPods, len(r.Unschedulable))
	fmt.Fprintf(&b, "Price source: %s.\n", r.PriceSource)
	for _, class := range keys(r.Zones) {
		z := r.Zones[class]
		fmt.Fprintf(&b, "Zones of EC2NodeClass %s: %s (%s).\n", class, strings.Join(z.Zones, ", "), z.Source)
	}
	for _, n := range r.Ignored {
		fmt.Fprintf(&b, "Ignored %s (%s): %s.\n", n.Object, n.Source, n.Reason)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func abbreviate(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(", ... (%d more)", len(items)-n)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return nonNil(s)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// roundPrice rounds a USD-per-hour price to 6 decimals.
func roundPrice(p float64) float64 { return math.Round(p*1e6) / 1e6 }
