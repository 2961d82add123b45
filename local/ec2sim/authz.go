package ec2sim

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Denial refuses an EC2 action to the caller, as an IAM policy statement
// with Effect Deny would: the action's calls, dry runs included, fail with
// UnauthorizedOperation (HTTP 403) once their parameters are valid.
type Denial struct {
	// Action is the EC2 action, e.g. "CreateFleet".
	Action string `json:"action"`
	// RequestTags, when set, limits the denial to requests that tag a
	// resource with every one of these key/value pairs (the IAM condition
	// aws:RequestTag/<key> StringEquals <value>, checked against each
	// TagSpecification of the request). Empty: every call of Action.
	RequestTags map[string]string `json:"requestTags,omitempty"`
}

// authorizedActions are the actions whose calls are checked against the
// denials and honour DryRun.
var authorizedActions = []string{"CreateFleet", "CreateLaunchTemplate", "RunInstances"}

// callerARN is the identity named in UnauthorizedOperation messages.
func (s *Server) callerARN() string {
	return "arn:aws:sts::" + s.accountID + ":assumed-role/" + s.clusterName + "-controller/simulated"
}

// Deny adds d; calls of d.Action then fail with UnauthorizedOperation
// while any matching denial stays. Unknown or unchecked actions are an
// error naming the action.
func (s *Server) Deny(d Denial) error {
	if !slices.Contains(authorizedActions, d.Action) {
		return fmt.Errorf("action %q: the simulator authorizes only %s", d.Action, strings.Join(authorizedActions, ", "))
	}
	s.mu.Lock()
	defer s.unlock()
	s.denials = append(s.denials, Denial{Action: d.Action, RequestTags: maps.Clone(d.RequestTags)})
	return nil
}

// Allow removes every denial of action.
func (s *Server) Allow(action string) {
	s.mu.Lock()
	defer s.unlock()
	s.denials = slices.DeleteFunc(s.denials, func(d Denial) bool { return d.Action == action })
}

// Denials returns the denials in force, in the order they were added.
func (s *Server) Denials() []Denial {
	s.mu.Lock()
	defer s.unlock()
	return slices.Clone(s.denials)
}

// authorize is the permission step of an authorized action, run after its
// parameters were validated (EC2 reports a malformed request before it
// checks permissions) and before any effect: UnauthorizedOperation when a
// denial matches the request's tags, else DryRunOperation (HTTP 412,
// "Request would have succeeded, but DryRun flag is set.") for a dry run,
// else nil. resource is the ARN resource part ("fleet/*").
func (s *Server) authorize(action string, q *qnode, resource string) error {
	specs := tagSpecs(q.list("TagSpecification"))
	for _, d := range s.denials {
		if d.Action == action && tagsMatch(d.RequestTags, specs) {
			return s.unauthorized(action, resource)
		}
	}
	if dry, _, _ := q.boolParam("DryRun"); dry {
		return errorf("DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return nil
}

// dryRunParam validates the DryRun parameter: absent or a boolean.
func dryRunParam(q *qnode) (bool, error) {
	dry, _, err := q.boolParam("DryRun")
	return dry, err
}

// tagsMatch reports whether every want tag is on some resource type's
// tags of the request (an empty want matches every request).
func tagsMatch(want map[string]string, specs map[string][]tag) bool {
	for k, v := range want {
		found := false
		for _, tags := range specs {
			if slices.Contains(tags, tag{Key: k, Value: v}) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// unauthorized is EC2's UnauthorizedOperation for action: the message names
// the caller, the action and the resource and ends with an encoded
// authorization failure message (EC2 encodes it so only
// sts:DecodeAuthorizationMessage can read it; here it is base64 JSON of
// the same facts).
func (s *Server) unauthorized(action, resource string) error {
	arn := "arn:aws:ec2:" + s.region + ":" + s.accountID + ":" + resource
	decoded, _ := json.Marshal(map[string]any{
		"allowed": false, "explicitDeny": true,
		"context": map[string]string{"principal": s.callerARN(), "action": "ec2:" + action, "resource": arn},
	})
	return errorf("UnauthorizedOperation",
		"You are not authorized to perform this operation. User: %s is not authorized to perform: ec2:%s on resource: %s with an explicit deny in an identity-based policy. Encoded authorization failure message: %s",
		s.callerARN(), action, arn, base64.RawURLEncoding.EncodeToString(decoded))
}

// runInstancesTagTypes are the resource types RunInstances tags.
var runInstancesTagTypes = []string{"instance", "volume", "network-interface", "spot-instances-request", "elastic-gpu"}

// runInstances answers RunInstances dry runs: MinCount and MaxCount
// (required, 1 <= MinCount <= MaxCount), the launch template (when named:
// it must exist), the image (an ImageId or the template's), the instance
// type (the request's or the template's; it must exist), the subnets of
// SubnetId and NetworkInterface.N.SubnetId (they must exist) and the
// TagSpecification resource types are validated, then authorize answers.
// The simulator launches through CreateFleet only: a RunInstances call
// that passes authorization without DryRun fails with
// UnsupportedOperation and launches nothing.
func (s *Server) runInstances(q *qnode, _ time.Time) (response, error) {
	if _, err := dryRunParam(q); err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, p := range []string{"MinCount", "MaxCount"} {
		v, ok, err := q.intParam(p)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, missingParameter(p)
		}
		if v < 1 {
			return nil, invalidParameterValue("Value (%s) for parameter %s is invalid. Must be at least 1.", strconv.Itoa(v), p)
		}
		counts[p] = v
	}
	if counts["MinCount"] > counts["MaxCount"] {
		return nil, invalidParameterValue("MinCount (%d) must be less than or equal to MaxCount (%d).", counts["MinCount"], counts["MaxCount"])
	}
	imageID, instanceType := q.str("ImageId"), q.str("InstanceType")
	if spec := q.get("LaunchTemplate"); spec != nil {
		lt, err := s.resolveTemplate(spec)
		if err != nil {
			return nil, err
		}
		imageID, instanceType = cmp.Or(imageID, lt.data.imageID), cmp.Or(instanceType, lt.data.instanceType)
	}
	if imageID == "" {
		return nil, missingParameter("ImageId")
	}
	if s.imageByID(imageID) == nil {
		return nil, errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", imageID)
	}
	if instanceType != "" && s.types.byName[instanceType] == nil {
		return nil, invalidParameterValue("The instance type '%s' does not exist.", instanceType)
	}
	subnets := []string{q.str("SubnetId")}
	for _, ni := range q.list("NetworkInterface") {
		subnets = append(subnets, ni.str("SubnetId"))
	}
	for _, id := range subnets {
		if id != "" && s.subnetByID(id) == nil {
			return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	for rt, tags := range tagSpecs(q.list("TagSpecification")) {
		if !slices.Contains(runInstancesTagTypes, rt) {
			return nil, invalidParameterValue("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		if err := validateTags(tags, nil); err != nil {
			return nil, err
		}
	}
	if err := s.authorize("RunInstances", q, "instance/*"); err != nil {
		return nil, err
	}
	return nil, errorf("UnsupportedOperation", "The simulator launches instances through CreateFleet only; RunInstances answers dry runs.")
}
