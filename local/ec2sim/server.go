package ec2sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// ec2Namespace is the XML namespace of every EC2 Query response
// (EC2 API version 2016-11-15, the one aws-sdk-go-v2 sends).
const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// Defaults applied by New.
const (
	DefaultRegion         = "us-east-1"
	DefaultClusterName    = "nodewright"
	DefaultAccountID      = "111122223333"
	DefaultSpotPriceRatio = 0.35
	// SpotReclaimDelay is how long after a Spot interruption warning EC2
	// reclaims the instance (the two-minute notice).
	SpotReclaimDelay = 2 * time.Minute
	// TerminatedVisibility is how long a terminated instance stays visible
	// to DescribeInstances (EC2 keeps them for about an hour).
	TerminatedVisibility = time.Hour
)

// defaultKubernetesVersions are the Kubernetes minor versions whose EKS AMIs
// and SSM parameters are seeded when Options.KubernetesVersions is empty.
var defaultKubernetesVersions = []string{"1.32", "1.33", "1.34"}

// Options configure New. The zero value gives us-east-1 with zones a, b and
// c, the wall clock, no boot delay and cluster "nodewright".
type Options struct {
	// Region is the region the simulator serves, e.g. "us-east-1" or
	// "ap-northeast-1".
	Region string
	// Zones are the availability-zone names; each must start with Region.
	// Empty means a, b, c (ap-northeast-1: a, c, d, as EC2 names them there).
	// At most 8 zones.
	Zones []string
	// ClusterName is used in the seeded tags (karpenter.sh/discovery,
	// kubernetes.io/cluster/<name>) and resource names.
	ClusterName string
	// KubernetesVersions lists the minor versions ("1.33") to seed EKS AMIs
	// and SSM parameters for; empty means 1.32, 1.33 and 1.34.
	KubernetesVersions []string
	// AccountID owns the seeded VPC, subnets, security groups, launch
	// templates and instances.
	AccountID string
	// Clock is the time source; nil means the wall clock.
	Clock Clock
	// BootDelay is how long a launched instance stays pending before it is
	// running. 0 means it is running as soon as the clock is read again.
	BootDelay time.Duration
	// ShutdownDelay is how long a terminating instance stays shutting-down.
	ShutdownDelay time.Duration
	// SpotPriceRatio prices every Spot pool at the on-demand price times
	// this ratio unless SetSpotPrice overrides it; 0 means
	// DefaultSpotPriceRatio.
	SpotPriceRatio float64
	// World chooses uniform or realistic EC2 facts (WorldDefault:
	// realistic in ap-northeast-1, uniform elsewhere). Any other value
	// fails New.
	World World
}

// Server is the simulator: an http.Handler speaking the EC2 Query protocol,
// the SSM JSON protocol (GetParameter, GetParameters) and a JSON control
// API under /_sim/. All methods are safe for concurrent use.
type Server struct {
	mu sync.Mutex

	region      string
	zones       []zone
	clusterName string
	accountID   string
	k8s         []string
	clock       Clock
	bootDelay   time.Duration
	shutdown    time.Duration
	spotRatio   float64

	types   *typeTable
	seq     map[string]int
	vpcID   string
	vpcCIDR string
	subnets []*subnet
	groups  []*securityGroup
	// placementGroups are the seeded placement groups (placementgroups.go).
	placementGroups []*PlacementGroup
	images          []*image
	params          map[string]*parameter
	instances       map[string]*instance
	order           []string // instance IDs in launch order
	templates       map[string]*launchTemplate
	ltTokens        map[string]string        // CreateLaunchTemplate ClientToken → template ID
	fleets          map[string]*fleet        // by fleet ID
	tokens          map[string]*fleet        // CreateFleet ClientToken → fleet
	spotPrice       map[poolKey][]pricePoint // SetSpotPrice points, oldest first
	realistic       bool                     // Options.World, resolved for the region
	born            time.Time                // clock at New: price history starts here
	ice             map[Offering]string      // offering → error code
	injected        map[string][]string      // action → queued error codes
	answers         map[string][]AnswerFault // action → queued answer faults
	denials         []Denial                 // Deny: actions refused to the caller
	notices         []SpotInterruption
	calls           []Call
	sink            EventSink
	outbox          []Event // emitted under mu, delivered by unlock
	// health holds status checks and scheduled events (status.go).
	health map[string]*instanceHealth
	// profileLookup, when set, is the IAM lookup of a launch's instance
	// profile (SetInstanceProfileLookup).
	profileLookup func(nameOrARN string) (string, bool)
	// reservations are the capacity reservations (reservations.go), in
	// creation order.
	reservations []*CapacityReservation
}

// zone is one availability zone of the region.
type zone struct {
	name, id string
	index    int
}

// poolKey names an (instance type, zone) pool.
type poolKey struct{ instanceType, zone string }

// Offering names one (instance type, zone, capacity type) pool, as
// Karpenter's unavailable-offerings cache does. CapacityType is "spot" or
// "on-demand".
type Offering struct {
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
}

// tag is one EC2 tag of a request.
type tag struct {
	Key, Value string
}

// Call is one API request the simulator answered, in arrival order.
type Call struct {
	// Service is "ec2", "ssm" or "pricing".
	Service string
	// Action is the operation, e.g. "CreateFleet" or "GetParameter".
	Action string
	// Time is the simulator clock when the call arrived.
	Time time.Time
	// Params holds the EC2 form parameters (without Action and Version);
	// nil for SSM.
	Params url.Values
	// Body is the SSM or Pricing JSON request body; nil for EC2.
	Body []byte
	// ErrorCode is the API error code returned, or "" on success.
	ErrorCode string
	// AnswerFault says what happened to the answer ("dropped", "delayed
	// 5s"; "" when it was sent): DropAnswers, DelayAnswers.
	AnswerFault string
}

// New returns a simulator seeded with a VPC, one private and one public
// subnet per zone, security groups, EKS-optimized AMIs and their public SSM
// parameters (see the package documentation). It fails on an invalid
// option: a zone outside Region, more than 8 zones, a malformed Kubernetes
// version or a negative delay or ratio.
func New(opts Options) (*Server, error) {
	s := &Server{
		region:      opts.Region,
		clusterName: opts.ClusterName,
		accountID:   opts.AccountID,
		k8s:         slices.Clone(opts.KubernetesVersions),
		clock:       opts.Clock,
		bootDelay:   opts.BootDelay,
		shutdown:    opts.ShutdownDelay,
		spotRatio:   opts.SpotPriceRatio,
		seq:         map[string]int{},
		params:      map[string]*parameter{},
		instances:   map[string]*instance{},
		templates:   map[string]*launchTemplate{},
		ltTokens:    map[string]string{},
		fleets:      map[string]*fleet{},
		tokens:      map[string]*fleet{},
		spotPrice:   map[poolKey][]pricePoint{},
		ice:         map[Offering]string{},
		injected:    map[string][]string{},
		answers:     map[string][]AnswerFault{},
	}
	if s.region == "" {
		s.region = DefaultRegion
	}
	if s.clusterName == "" {
		s.clusterName = DefaultClusterName
	}
	if s.accountID == "" {
		s.accountID = DefaultAccountID
	}
	if len(s.k8s) == 0 {
		s.k8s = slices.Clone(defaultKubernetesVersions)
	}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	if s.spotRatio == 0 {
		s.spotRatio = DefaultSpotPriceRatio
	}
	switch opts.World {
	case WorldDefault, WorldUniform, WorldRealistic:
		s.realistic = opts.World.realistic(s.region)
	default:
		return nil, fmt.Errorf("options.World %q: want %q, %q or empty", opts.World, WorldUniform, WorldRealistic)
	}
	s.born = s.clock.Now()
	if s.bootDelay < 0 || s.shutdown < 0 {
		return nil, errors.New("options: BootDelay and ShutdownDelay must not be negative")
	}
	if s.spotRatio < 0 {
		return nil, fmt.Errorf("options.SpotPriceRatio %v: must not be negative", s.spotRatio)
	}
	zoneNames := opts.Zones
	if len(zoneNames) == 0 {
		letters := "abc"
		if s.region == "ap-northeast-1" {
			letters = "acd"
		}
		for _, l := range letters {
			zoneNames = append(zoneNames, s.region+string(l))
		}
	}
	if len(zoneNames) > 8 {
		return nil, fmt.Errorf("options.Zones: %d zones, at most 8", len(zoneNames))
	}
	short := regionShortName(s.region)
	for i, z := range zoneNames {
		if !strings.HasPrefix(z, s.region) || len(z) == len(s.region) {
			return nil, fmt.Errorf("options.Zones[%d] %q: not a zone of region %q", i, z, s.region)
		}
		if slices.ContainsFunc(s.zones, func(o zone) bool { return o.name == z }) {
			return nil, fmt.Errorf("options.Zones[%d] %q: duplicate", i, z)
		}
		s.zones = append(s.zones, zone{name: z, id: fmt.Sprintf("%s-az%d", short, i+1), index: i})
	}
	for i, v := range s.k8s {
		if _, _, ok := parseMinor(v); !ok {
			return nil, fmt.Errorf("options.KubernetesVersions[%d] %q: want a minor version such as 1.33", i, v)
		}
	}
	types, err := loadTypes(s.region, s.zoneNames())
	if err != nil {
		return nil, fmt.Errorf("instance types: %w", err)
	}
	s.types = types
	s.seedNetwork()
	s.seedImages()
	return s, nil
}

// Region returns the simulated region.
func (s *Server) Region() string { return s.region }

// ClusterName returns the cluster name used in the seeded tags.
func (s *Server) ClusterName() string { return s.clusterName }

// Zones returns the availability-zone names, in order.
func (s *Server) Zones() []string { return s.zoneNames() }

func (s *Server) zoneNames() []string {
	out := make([]string, len(s.zones))
	for i, z := range s.zones {
		out[i] = z.name
	}
	return out
}

func (s *Server) zoneByName(name string) (zone, bool) {
	for _, z := range s.zones {
		if z.name == name {
			return z, true
		}
	}
	return zone{}, false
}

// regionShortName abbreviates a region for zone IDs the way AWS does:
// us-east-1 → use1, ap-northeast-1 → apne1, eu-central-1 → euc1.
func regionShortName(region string) string {
	parts := strings.Split(region, "-")
	if len(parts) < 3 {
		return region
	}
	dir := map[string]string{"east": "e", "west": "w", "north": "n", "south": "s", "central": "c",
		"northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw"}
	var b strings.Builder
	b.WriteString(parts[0])
	for _, p := range parts[1 : len(parts)-1] {
		if d, ok := dir[p]; ok {
			b.WriteString(d)
		} else {
			b.WriteString(p)
		}
	}
	b.WriteString(parts[len(parts)-1])
	return b.String()
}

// hashHex returns n hex digits derived from key.
func hashHex(key string, n int) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:n]
}

// newID returns the next ID of a kind, e.g. "i-0a1b…" (17 hex digits, as
// EC2 issues them). IDs are deterministic per simulator.
func (s *Server) newID(prefix string) string {
	s.seq[prefix]++
	return prefix + "-" + hashHex(fmt.Sprintf("%s/%s/%d", s.region, prefix, s.seq[prefix]), 17)
}

// newUUID returns the next UUID-shaped identifier of a kind (request IDs,
// fleet IDs).
func (s *Server) newUUID(kind string) string {
	s.seq[kind]++
	h := hashHex(fmt.Sprintf("%s/%s/%d", s.region, kind, s.seq[kind]), 32)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// ServeHTTP answers EC2 Query requests (form-encoded, Action=...), SSM
// JSON requests (X-Amz-Target: AmazonSSM.*), Price List Query API
// requests (X-Amz-Target: AWSPriceListService.*) and control requests under
// /_sim/. It does not check SigV4 signatures.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_sim" || strings.HasPrefix(r.URL.Path, "/_sim/"):
		s.serveControl(w, r)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM."):
		s.serveSSM(w, r)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AWSPriceListService."):
		s.servePricing(w, r)
	default:
		s.serveEC2(w, r)
	}
}

// ec2Handler answers one EC2 action. It runs with s.mu held and returns the
// response body (a struct marshalled inside <ActionResponse>).
type ec2Handler func(s *Server, q *qnode, now time.Time) (response, error)

var ec2Actions = map[string]ec2Handler{
	"CreateFleet":                    (*Server).createFleet,
	"DescribeInstances":              (*Server).describeInstances,
	"TerminateInstances":             (*Server).terminateInstances,
	"CreateTags":                     (*Server).createTags,
	"DescribeInstanceTypes":          (*Server).describeInstanceTypes,
	"DescribeInstanceTypeOfferings":  (*Server).describeInstanceTypeOfferings,
	"DescribeSpotPriceHistory":       (*Server).describeSpotPriceHistory,
	"DescribeAvailabilityZones":      (*Server).describeAvailabilityZones,
	"DescribeSubnets":                (*Server).describeSubnets,
	"DescribeSecurityGroups":         (*Server).describeSecurityGroups,
	"DescribeImages":                 (*Server).describeImages,
	"CreateLaunchTemplate":           (*Server).createLaunchTemplate,
	"DescribeLaunchTemplates":        (*Server).describeLaunchTemplates,
	"DescribeLaunchTemplateVersions": (*Server).describeLaunchTemplateVersions,
	"DeleteLaunchTemplate":           (*Server).deleteLaunchTemplate,
	"DescribeInstanceStatus":         (*Server).describeInstanceStatus,
	"DescribePlacementGroups":        (*Server).describePlacementGroups,
	"DescribeCapacityReservations":   (*Server).describeCapacityReservations,
	"RunInstances":                   (*Server).runInstances,
}

func (s *Server) serveEC2(w http.ResponseWriter, r *http.Request) {
	// The answer is written after the lock is released (deferred first,
	// so it runs last), late or never when an answer fault says so.
	var fault AnswerFault
	write := func() {}
	defer func() { answer(w, fault, write) }()
	if err := r.ParseForm(); err != nil {
		writeEC2Error(w, "", &apiError{Code: "MalformedQueryString", Message: err.Error()})
		return
	}
	action := r.Form.Get("Action")
	params := url.Values{}
	for k, v := range r.Form {
		if k != "Action" && k != "Version" {
			params[k] = slices.Clone(v)
		}
	}

	s.mu.Lock()
	defer s.unlock()
	now := s.clock.Now()
	s.advance(now)
	requestID := s.newUUID("request")
	call := Call{Service: "ec2", Action: action, Time: now, Params: params}

	var body response
	err := s.takeInjected(action)
	if err == nil {
		h, ok := ec2Actions[action]
		if !ok {
			if action == "" {
				err = missingParameter("Action")
			} else {
				err = errorf("InvalidAction", "The action %s is not valid for this web service.", action)
			}
		} else {
			body, err = h(s, parseQuery(r.Form), now)
		}
	}
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{Code: "InternalError", Message: err.Error()}
		}
		call.ErrorCode = ae.Code
		if !call.DryRun() {
			// Answer faults script the answers of real calls.
			fault, call.AnswerFault = s.takeAnswerFault(action)
		}
		s.calls = append(s.calls, call)
		write = func() { writeEC2Error(w, requestID, ae) }
		return
	}
	fault, call.AnswerFault = s.takeAnswerFault(action)
	s.calls = append(s.calls, call)
	write = func() { writeEC2Response(w, action, requestID, body) }
}

// AnswerFault is what happens to the answer of one call, after the
// simulator has carried the call out (instances launched, tokens
// recorded): it arrives Delay late (wall clock), or, with Drop, never (the
// connection is closed without a response, as when the network loses it
// or the caller's Lambda is killed mid-call).
type AnswerFault struct {
	Drop  bool          `json:"drop,omitempty"`
	Delay time.Duration `json:"delay,omitempty"`
}

// String describes the fault for Call.AnswerFault ("" for none).
func (f AnswerFault) String() string {
	switch {
	case f.Drop && f.Delay > 0:
		return "dropped after " + f.Delay.String()
	case f.Drop:
		return "dropped"
	case f.Delay > 0:
		return "delayed " + f.Delay.String()
	}
	return ""
}

// DropAnswers makes the next n calls (dry runs excepted) of an EC2 action take effect
// and lose their answer: the caller sees the connection close. The SDK's
// retries of such a call are calls too (each counts against n), so
// dropping as many answers as the client makes attempts fails the whole
// SDK call after EC2 acted. Faults queue up in order.
func (s *Server) DropAnswers(action string, n int) {
	s.queueAnswerFaults(action, AnswerFault{Drop: true}, n)
}

// DelayAnswers makes the next n answers of action arrive d late (wall
// clock: a caller's timeout shorter than d sees no answer, although the
// call took effect).
func (s *Server) DelayAnswers(action string, d time.Duration, n int) {
	s.queueAnswerFaults(action, AnswerFault{Delay: d}, n)
}

func (s *Server) queueAnswerFaults(action string, f AnswerFault, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.answers[action] = append(s.answers[action], f)
	}
}

// takeAnswerFault pops the next answer fault of action, if any.
func (s *Server) takeAnswerFault(action string) (AnswerFault, string) {
	q := s.answers[action]
	if len(q) == 0 {
		return AnswerFault{}, ""
	}
	if len(q) == 1 {
		delete(s.answers, action)
	} else {
		s.answers[action] = q[1:]
	}
	return q[0], q[0].String()
}

// answer writes an answer (write) as fault says: after its delay, or not
// at all, closing the connection instead.
func answer(w http.ResponseWriter, fault AnswerFault, write func()) {
	if fault.Delay > 0 {
		time.Sleep(fault.Delay)
	}
	if !fault.Drop {
		write()
		return
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// No hijackable connection (HTTP/2, a recorder): abort the handler,
	// which net/http turns into a reset stream or closed connection.
	panic(http.ErrAbortHandler)
}

// takeInjected pops the next injected error for action, if any.
func (s *Server) takeInjected(action string) error {
	q := s.injected[action]
	if len(q) == 0 {
		return nil
	}
	code := q[0]
	if len(q) == 1 {
		delete(s.injected, action)
	} else {
		s.injected[action] = q[1:]
	}
	return &apiError{Code: code, Message: injectedMessage(code)}
}

// respHeader is embedded first in every EC2 response body.
type respHeader struct {
	RequestID string `xml:"requestId"`
}

func (h *respHeader) setRequestID(id string) { h.RequestID = id }

// response is a pointer to an EC2 response body struct embedding
// respHeader; its fields become the children of <{Action}Response>.
type response interface{ setRequestID(id string) }

// writeEC2Response writes body as <{action}Response xmlns=...>, with the
// request ID first, as EC2 does.
func writeEC2Response(w http.ResponseWriter, action, requestID string, body response) {
	body.setRequestID(requestID)
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Space: ec2Namespace, Local: action + "Response"}}
	if err := enc.EncodeElement(body, start); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// writeEC2Error writes EC2's error envelope:
// <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>.
func writeEC2Error(w http.ResponseWriter, requestID string, e *apiError) {
	type errXML struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	type respXML struct {
		XMLName   xml.Name `xml:"Response"`
		Errors    []errXML `xml:"Errors>Error"`
		RequestID string   `xml:"RequestID"`
	}
	raw, err := xml.Marshal(respXML{Errors: []errXML{{Code: e.Code, Message: e.Message}}, RequestID: requestID})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(httpStatus(e.Code))
	_, _ = w.Write(append([]byte(xml.Header), raw...))
}

// Calls returns every API call answered so far, oldest first. The result
// is a copy.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls))
	for i, c := range s.calls {
		c.Params = maps.Clone(c.Params)
		c.Body = slices.Clone(c.Body)
		out[i] = c
	}
	return out
}

// DryRun reports whether the call was an EC2 dry run (DryRun=true).
func (c Call) DryRun() bool { return c.Service == "ec2" && c.Params.Get("DryRun") == "true" }

// CallsTo returns the calls of one action that were not dry runs, oldest
// first (Calls holds the dry runs too).
func (s *Server) CallsTo(action string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Action == action && !c.DryRun() {
			out = append(out, c)
		}
	}
	return out
}

// InjectError makes the next n calls of action (an EC2 action such as
// "CreateFleet" or an SSM one such as "GetParameter") fail with code before
// doing anything. Injections queue up in order.
func (s *Server) InjectError(action, code string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.injected[action] = append(s.injected[action], code)
	}
}

// Throttle makes the next n calls of action fail as throttled:
// RequestLimitExceeded (HTTP 503) for EC2 actions, ThrottlingException for
// SSM and Pricing actions.
func (s *Server) Throttle(action string, n int) {
	code := "RequestLimitExceeded"
	if ssmActions[action] || pricingActions[action] {
		code = "ThrottlingException"
	}
	s.InjectError(action, code, n)
}

// SetInstanceProfileLookup makes every launch look its launch template's
// instance profile (a name or an ARN) up with lookup, as EC2 asks IAM: a
// profile that does not exist fails the pool with InvalidParameterValue,
// EC2's answer, and an instance reports the ARN lookup returns (with the
// profile's path). nil (the default) checks nothing and derives the ARN
// from the name, for a simulator with no IAM beside it.
func (s *Server) SetInstanceProfileLookup(lookup func(nameOrARN string) (arn string, ok bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profileLookup = lookup
}

// Now returns the simulator's clock reading.
func (s *Server) Now() time.Time { return s.clock.Now() }

// Clock returns the simulator's clock (a *FakeClock when one was given).
func (s *Server) Clock() Clock { return s.clock }
