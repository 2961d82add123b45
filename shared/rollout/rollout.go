// Package rollout forecasts a rollout: it runs the disruption engine
// (shared/disruption.Evaluate, the evaluation the disruption Lambda runs)
// forward on a simulated clock over a cluster snapshot and returns when each
// node is replaced, by what, at what extra cost, and which nodes never are.
//
// It is pure: snapshot and clock in, timeline out. Every decision (drift,
// expiration, emptiness, consolidation, budgets and their cron windows,
// do-not-disrupt, PodDisruptionBudgets, in-flight commands) is the engine's;
// this package only advances time and applies the commands the engine starts
// the way the drain-and-replace state machine carries them out: launch the
// replacements, wait until they are Ready (Options.Boot), drain the
// candidates (Options.Drain, capped at the NodeClaim's
// terminationGracePeriod), delete them.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/disruption"
)

// Defaults of Options.
const (
	// DefaultPoll is the disruption evaluation's cadence: the disruption
	// Lambda's EventBridge Scheduler schedule, rate(1 minute)
	// (infra/nodewright/functions.go).
	DefaultPoll = time.Minute
	// DefaultBoot is a replacement's launch-to-Ready time: the upper end of
	// the 45-90 s a new EKS node takes to provision and join, as measured
	// in a production EKS environment (devfloor9 engineering playbook,
	// "Comprehensive Guide to Karpenter-Based EKS Scaling Strategies",
	// 2026).
	DefaultBoot = 90 * time.Second
	// DefaultDrain is a candidate's drain-to-deleted time: twice the
	// Kubernetes default pod terminationGracePeriodSeconds (30 s). It is an
	// assumption, not a measurement: set it to what your pods take.
	DefaultDrain = time.Minute
	// DefaultHorizon is how far after From the forecast runs when Until is
	// zero: two days, so that a daily budget window opens at least once.
	DefaultHorizon = 48 * time.Hour
)

// Options tune the forecast; a zero field takes its default.
type Options struct {
	// From is the instant of the first evaluation; Until the last instant
	// evaluated (zero: From + DefaultHorizon).
	From, Until time.Time
	// Poll is the time between evaluations (DefaultPoll).
	Poll time.Duration
	// Boot is the time from starting a command to its replacements being
	// Ready (DefaultBoot).
	Boot time.Duration
	// Drain is the time to drain and delete a candidate once the
	// replacements are Ready (DefaultDrain); a NodeClaim's
	// terminationGracePeriod caps it.
	Drain time.Duration
}

// Step is one node's replacement (or deletion) by one command.
type Step struct {
	// Command is the engine's command ID; Method and Decision are its
	// method (Drifted, Expired, Empty, Underutilized) and decision.
	Command  string              `json:"command"`
	Method   disruption.Method   `json:"method"`
	Decision disruption.Decision `json:"decision"`
	// NodeClaim, Node, NodePool and InstanceType name the node replaced.
	NodeClaim    string `json:"nodeClaim"`
	Node         string `json:"node,omitempty"`
	NodePool     string `json:"nodePool"`
	InstanceType string `json:"instanceType,omitempty"`
	// Reason is the engine's reason for the command (drift reason etc.).
	Reason string `json:"reason"`
	// Start is when the evaluation started the command; Ready when its
	// replacements are Ready and the drain starts; Done when the node is
	// gone. All UTC.
	Start time.Time `json:"start"`
	Ready time.Time `json:"ready"`
	Done  time.Time `json:"done"`
	// Replacements are what replaces the node: "<type> <capacity type>
	// <zone>" of each replacement NodeClaim the command launches ([] for a
	// delete).
	Replacements []string `json:"replacements"`
	// ExtraPerHour is the price per hour of the command's replacements
	// while they run next to the candidates (Start to Done), in the price
	// table's currency.
	ExtraPerHour float64 `json:"extraPerHour"`
}

// Stuck is a NodeClaim the engine still wants to disrupt (drifted) at the
// end of the forecast, or one it started but whose drain never ends.
type Stuck struct {
	NodeClaim string `json:"nodeClaim"`
	Node      string `json:"node,omitempty"`
	NodePool  string `json:"nodePool,omitempty"`
	// Drift is the drift reason (AMIDrift, NodePoolDrifted, ...).
	Drift string `json:"drift,omitempty"`
	// Reason is the engine's last reason for leaving it alone
	// (do-not-disrupt, a PodDisruptionBudget, budgets ...).
	Reason string `json:"reason"`
}

// Window is a span in which a NodePool's budget for a reason allows at
// least one disruption (Allowed != 0 at every poll inside it).
type Window struct {
	NodePool string            `json:"nodePool"`
	Reason   disruption.Method `json:"reason"`
	Start    time.Time         `json:"start"`
	End      time.Time         `json:"end"`
}

// Timeline is the forecast.
type Timeline struct {
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
	// Poll, Boot and Drain are the durations used, in seconds.
	PollSeconds  float64 `json:"pollSeconds"`
	BootSeconds  float64 `json:"bootSeconds"`
	DrainSeconds float64 `json:"drainSeconds"`
	// Evaluations counts the simulated evaluations.
	Evaluations int `json:"evaluations"`
	// Steps are the replacements in start order.
	Steps []Step `json:"steps"`
	// Never are the NodeClaims still drifted at Until, and the started
	// ones whose drain never ends, with the reason.
	Never []Stuck `json:"never"`
	// Finished says every drifted NodeClaim was replaced by Until; Finish
	// is then when the last step was done (From when nothing had to be).
	Finished bool       `json:"finished"`
	Finish   *time.Time `json:"finish,omitempty"`
	// PeakExtraNodes is the most replacement nodes running next to their
	// candidates at once, and PeakExtraPerHour the most they cost at once.
	PeakExtraNodes   int     `json:"peakExtraNodes"`
	PeakExtraPerHour float64 `json:"peakExtraPerHour"`
	// PeakDisrupting is the most candidates being replaced at once.
	PeakDisrupting int `json:"peakDisrupting"`
	// Windows are the spans each NodePool's Drifted budget allows
	// disruptions, as the engine reported them at each poll.
	Windows []Window `json:"windows"`
}

// inflight is a command being carried out.
type inflight struct {
	cmd        disruption.Command
	steps      []int // indexes into Timeline.Steps
	ready      time.Time
	done       time.Time
	never      bool // a drain that never ends
	extraNodes int
	extraPrice float64
}

// Forecast runs the engine forward from opts.From over snap (whose Now,
// InFlight and HeldReplacements it sets itself). It returns an error for
// an invalid option or when the engine rejects the snapshot.
func Forecast(ctx context.Context, snap disruption.Input, opts Options) (Timeline, error) {
	opts, err := withDefaults(opts)
	if err != nil {
		return Timeline{}, err
	}
	s := &sim{in: cloneInput(snap), opts: opts}
	s.tl = Timeline{
		From: opts.From.UTC(), Until: opts.Until.UTC(),
		PollSeconds: opts.Poll.Seconds(), BootSeconds: opts.Boot.Seconds(), DrainSeconds: opts.Drain.Seconds(),
		Steps: []Step{}, Never: []Stuck{}, Windows: []Window{},
	}
	var last disruption.Result
	for now := opts.From; !now.After(opts.Until); now = now.Add(opts.Poll) {
		if err := ctx.Err(); err != nil {
			return Timeline{}, err
		}
		s.complete(now)
		s.in.Now = now
		s.in.InFlight = s.in.InFlight[:0]
		for _, f := range s.flight {
			s.in.InFlight = append(s.in.InFlight, f.cmd)
		}
		res, err := disruption.Evaluate(ctx, s.in)
		if err != nil {
			return Timeline{}, fmt.Errorf("evaluate at %s: %w", now.UTC().Format(time.RFC3339), err)
		}
		s.tl.Evaluations++
		s.windows(now, res.Budgets)
		for _, c := range res.Commands {
			s.start(now, c)
		}
		s.peaks()
		last = res
	}
	s.finish(last)
	return s.tl, nil
}

func withDefaults(o Options) (Options, error) {
	if o.From.IsZero() {
		return o, errors.New("options: From: the forecast needs a start instant")
	}
	if o.Until.IsZero() {
		o.Until = o.From.Add(DefaultHorizon)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"Poll", &o.Poll, DefaultPoll}, {"Boot", &o.Boot, DefaultBoot}, {"Drain", &o.Drain, DefaultDrain}} {
		if *d.v < 0 {
			return o, fmt.Errorf("options: %s %s: want a duration of 0 or more", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.Until.Before(o.From) {
		return o, fmt.Errorf("options: Until %s is before From %s", o.Until.UTC().Format(time.RFC3339), o.From.UTC().Format(time.RFC3339))
	}
	if n := o.Until.Sub(o.From) / o.Poll; n > 1_000_000 {
		return o, fmt.Errorf("options: Until - From spans %d polls of %s; at most 1000000", n, o.Poll)
	}
	return o, nil
}

// sim is the forecast's mutable state.
type sim struct {
	in     disruption.Input
	opts   Options
	tl     Timeline
	flight []*inflight
	serial int
}

func cloneInput(in disruption.Input) disruption.Input {
	out := in
	out.NodeClaims = slices.Clone(in.NodeClaims)
	out.Nodes = slices.Clone(in.Nodes)
	out.Pods = slices.Clone(in.Pods)
	out.InFlight = nil
	out.HeldReplacements = nil
	out.NominatedUntil = maps.Clone(in.NominatedUntil)
	return out
}

// start records command c started at now and schedules its end.
func (s *sim) start(now time.Time, c disruption.Command) {
	f := &inflight{cmd: c, ready: now.Add(s.opts.Boot)}
	if len(c.Replacements) == 0 {
		f.ready = now // nothing to launch first
	}
	drain := s.opts.Drain
	var repl []string
	for _, r := range c.Replacements {
		e := r.Expected
		repl = append(repl, fmt.Sprintf("%s %s %s", e.InstanceType, e.CapacityType, e.Zone))
		f.extraPrice += e.PricePerHour
	}
	f.extraNodes = len(c.Replacements)
	if repl == nil {
		repl = []string{}
	}
	if c.Method.Forceful() && len(c.Replacements) == 0 && len(c.Candidates) > 0 {
		// apply models provisioning's new node for the evicted pods.
		k := c.Candidates[0]
		repl = []string{fmt.Sprintf("%s %s %s (provisioning, after the drain)", k.InstanceType, k.CapacityType, k.Zone)}
	}
	for _, cand := range c.Candidates {
		claim := s.claim(cand.NodeClaim)
		if claim != nil && claim.Spec.TerminationGracePeriod != nil && claim.Spec.TerminationGracePeriod.Duration < drain {
			drain = claim.Spec.TerminationGracePeriod.Duration
		}
		if !c.Budgeted && s.drainBlocked(cand.Node) && (claim == nil || claim.Spec.TerminationGracePeriod == nil) {
			// Expiration ignores do-not-disrupt and PDBs when it starts,
			// but the drain waits for them up to terminationGracePeriod;
			// without one it never ends (karpenter-spec §5.3).
			f.never = true
		}
		s.tl.Steps = append(s.tl.Steps, Step{
			Command: c.ID, Method: c.Method, Decision: c.Decision, NodeClaim: cand.NodeClaim, Node: cand.Node,
			NodePool: cand.NodePool, InstanceType: cand.InstanceType, Reason: c.Reason, Start: now.UTC(),
			Ready: f.ready.UTC(), Replacements: repl, ExtraPerHour: f.extraPrice,
		})
		f.steps = append(f.steps, len(s.tl.Steps)-1)
	}
	f.done = f.ready.Add(drain)
	for _, i := range f.steps {
		if !f.never {
			s.tl.Steps[i].Done = f.done.UTC()
		}
	}
	s.flight = append(s.flight, f)
}

// drainBlocked reports whether node runs a pod with the do-not-disrupt
// annotation, which an eviction-based drain waits for.
func (s *sim) drainBlocked(node string) bool {
	for _, p := range s.in.Pods {
		if p.Spec.NodeName == node && p.Annotations[v1.AnnotationDoNotDisrupt] == "true" {
			return true
		}
	}
	return false
}

func (s *sim) claim(name string) *v1.NodeClaim {
	for i := range s.in.NodeClaims {
		if s.in.NodeClaims[i].Name == name {
			return &s.in.NodeClaims[i]
		}
	}
	return nil
}

// complete applies every in-flight command done by now: the candidates'
// NodeClaims and Nodes go, the replacements join as Ready nodes, and the
// candidates' pods move to them.
func (s *sim) complete(now time.Time) {
	keep := s.flight[:0]
	for _, f := range s.flight {
		if f.never || f.done.After(now) {
			keep = append(keep, f)
			continue
		}
		s.apply(f)
	}
	s.flight = keep
}

func (s *sim) apply(f *inflight) {
	gone := map[string]bool{}
	var firstClaim *v1.NodeClaim
	var firstNode *corev1.Node
	for _, cand := range f.cmd.Candidates {
		gone[cand.NodeClaim], gone["node/"+cand.Node] = true, true
		if firstClaim == nil {
			firstClaim = s.claim(cand.NodeClaim)
			for i := range s.in.Nodes {
				if s.in.Nodes[i].Name == cand.Node {
					firstNode = &s.in.Nodes[i]
				}
			}
		}
	}
	var newNodes []string
	var claims []v1.NodeClaim
	var nodes []corev1.Node
	for _, r := range f.cmd.Replacements {
		c, n := s.replacement(r, firstClaim, firstNode, f.done)
		claims, nodes = append(claims, c), append(nodes, n)
		newNodes = append(newNodes, n.Name)
	}
	if f.cmd.Method.Forceful() && len(newNodes) == 0 && firstClaim != nil && firstNode != nil {
		// Expiration (and a capacity block's) deletes without a
		// replacement first; its pods go pending and provisioning
		// launches capacity like the expired node's, modelled as a fresh copy of it at the end of the drain.
		c, n := s.replacement(disruption.Replacement{NodeClaim: *firstClaim}, firstClaim, firstNode, f.done)
		claims, nodes = append(claims, c), append(nodes, n)
		newNodes = append(newNodes, n.Name)
	}
	s.in.NodeClaims = slices.DeleteFunc(s.in.NodeClaims, func(c v1.NodeClaim) bool { return gone[c.Name] })
	s.in.Nodes = slices.DeleteFunc(s.in.Nodes, func(n corev1.Node) bool { return gone["node/"+n.Name] })
	s.in.NodeClaims = append(s.in.NodeClaims, claims...)
	s.in.Nodes = append(s.in.Nodes, nodes...)
	// Pods of the candidates move to the replacements, round robin; with
	// none (a delete), to the other nodes of the pool the engine found
	// room on, approximated as round robin over the pool's nodes. DaemonSet
	// pods go with their node.
	if len(newNodes) == 0 && firstClaim != nil {
		for _, n := range s.in.Nodes {
			if n.Labels[v1.LabelNodePool] == firstClaim.Labels[v1.LabelNodePool] {
				newNodes = append(newNodes, n.Name)
			}
		}
	}
	k := 0
	s.in.Pods = slices.DeleteFunc(s.in.Pods, func(p corev1.Pod) bool {
		return gone["node/"+p.Spec.NodeName] && (daemonPod(p) || len(newNodes) == 0)
	})
	for i := range s.in.Pods {
		p := &s.in.Pods[i]
		if gone["node/"+p.Spec.NodeName] {
			p.Spec.NodeName = newNodes[k%len(newNodes)]
			k++
		}
	}
}

func daemonPod(p corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// replacement turns a planned replacement into a launched, registered and
// initialized NodeClaim and its Ready Node at t, modelled on the candidate
// (model, modelNode) for what the plan does not say. Its image is left
// empty: the new node runs what its EC2NodeClass selects, so AMI drift
// (which needs an image to compare) never finds it drifted.
func (s *sim) replacement(r disruption.Replacement, model *v1.NodeClaim, modelNode *corev1.Node, t time.Time) (v1.NodeClaim, corev1.Node) {
	s.serial++
	name := fmt.Sprintf("%s-r%d", strings.TrimSuffix(cmpOr(r.NodeClaim.Name, model.Name), "-"), s.serial)
	c := r.NodeClaim // maps and slices changed below are replaced, not written
	c.Annotations = maps.Clone(c.Annotations)
	c.Name, c.UID = name, ""
	c.CreationTimestamp = metav1.NewTime(t)
	c.DeletionTimestamp = nil
	c.Labels = maps.Clone(c.Labels)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	e := r.Expected
	if e.InstanceType == "" && model != nil { // a copy of the model
		e.InstanceType, e.Zone, e.CapacityType = model.Labels[v1.LabelInstanceType], model.Labels[v1.LabelTopologyZone], model.Labels[v1.LabelCapacityType]
	}
	if it := s.instanceType(c.Spec.NodeClassRef.Name, e.InstanceType); it != nil {
		maps.Copy(c.Labels, it.Labels)
		c.Status.Capacity = it.Capacity.DeepCopy()
		c.Status.Allocatable = it.Allocatable()
	}
	c.Labels[v1.LabelInstanceType], c.Labels[v1.LabelTopologyZone], c.Labels[v1.LabelCapacityType] = e.InstanceType, e.Zone, e.CapacityType
	if model != nil && c.Labels[v1.LabelNodePool] == "" {
		c.Labels[v1.LabelNodePool] = model.Labels[v1.LabelNodePool]
	}
	c.Labels[v1.LabelHostname] = name
	c.Labels[v1.LabelRegistered], c.Labels[v1.LabelInitialized] = "true", "true"
	c.Status.NodeName = name
	c.Status.ProviderID = v1.ProviderID(e.Zone, "i-"+name)
	c.Status.ImageID = ""
	c.Status.LastPodEventTime = metav1.NewTime(t)
	c.Status.Conditions = nil
	for _, typ := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, LastTransitionTime: metav1.NewTime(t)})
	}
	var n corev1.Node
	if modelNode != nil {
		n.Status.Conditions = slices.Clone(modelNode.Status.Conditions)
	}
	n.Name = name
	n.CreationTimestamp = metav1.NewTime(t)
	n.Labels = maps.Clone(c.Labels)
	n.Annotations = maps.Clone(c.Annotations)
	n.Spec.ProviderID = c.Status.ProviderID
	n.Spec.Taints = slices.Clone(c.Spec.Taints)
	n.Status.Capacity, n.Status.Allocatable = c.Status.Capacity.DeepCopy(), c.Status.Allocatable.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)}}
	return c, n
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *sim) instanceType(class, name string) *catalog.InstanceType {
	for _, it := range s.in.InstanceTypes[class] {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// windows extends each NodePool's Drifted-budget window with the poll at
// now when its budget allows a disruption there.
func (s *sim) windows(now time.Time, budgets []disruption.BudgetStatus) {
	for _, b := range budgets {
		if b.Reason != disruption.MethodDrifted || b.Allowed == 0 {
			continue
		}
		open := -1
		for i := range s.tl.Windows {
			w := &s.tl.Windows[i]
			if w.NodePool == b.NodePool && w.Reason == b.Reason && w.End.Equal(now.UTC()) {
				open = i
			}
		}
		end := now.Add(s.opts.Poll).UTC()
		if end.After(s.tl.Until) {
			end = s.tl.Until
		}
		if open >= 0 {
			s.tl.Windows[open].End = end
			continue
		}
		s.tl.Windows = append(s.tl.Windows, Window{NodePool: b.NodePool, Reason: b.Reason, Start: now.UTC(), End: end})
	}
}

func (s *sim) peaks() {
	nodes, price, disrupting := 0, 0.0, 0
	for _, f := range s.flight {
		nodes += f.extraNodes
		price += f.extraPrice
		disrupting += len(f.cmd.Candidates)
	}
	s.tl.PeakExtraNodes = max(s.tl.PeakExtraNodes, nodes)
	s.tl.PeakExtraPerHour = max(s.tl.PeakExtraPerHour, price)
	s.tl.PeakDisrupting = max(s.tl.PeakDisrupting, disrupting)
}

// finish lists what never finished: commands whose drain never ends, and
// the NodeClaims the last evaluation still found drifted, with its reason
// for leaving them alone.
func (s *sim) finish(last disruption.Result) {
	started := map[string]bool{}
	for _, f := range s.flight {
		for _, c := range f.cmd.Candidates {
			started[c.NodeClaim] = true
			if f.never {
				s.tl.Never = append(s.tl.Never, Stuck{NodeClaim: c.NodeClaim, Node: c.Node, NodePool: c.NodePool,
					Reason: "expired, but its drain waits for do-not-disrupt pods and the NodeClaim has no terminationGracePeriod to end it"})
			}
		}
	}
	why := map[string]disruption.Blocked{}
	for _, b := range last.Blocked {
		why[b.NodeClaim] = b
	}
	for _, d := range last.Drift {
		if d.Reason == "" || started[d.NodeClaim] {
			continue
		}
		b := why[d.NodeClaim]
		s.tl.Never = append(s.tl.Never, Stuck{NodeClaim: d.NodeClaim, Node: b.Node, NodePool: b.NodePool, Drift: d.Reason, Reason: cmpOr(b.Reason, "still drifted at the end of the forecast")})
	}
	sort.Slice(s.tl.Never, func(i, j int) bool { return s.tl.Never[i].NodeClaim < s.tl.Never[j].NodeClaim })
	if len(s.tl.Never) > 0 || len(s.flight) > 0 {
		return
	}
	s.tl.Finished = true
	finish := s.tl.From
	for _, st := range s.tl.Steps {
		if st.Done.After(finish) {
			finish = st.Done
		}
	}
	s.tl.Finish = &finish
}
