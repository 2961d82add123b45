// Package iamsim is the local stack's stand-in for AWS Identity and Access
// Management: an http.Handler speaking the IAM Query protocol (form-encoded
// Action=..., Version=2010-05-08; XML answers in IAM's envelope) for the
// calls nodewright makes about instance profiles, over roles that the test
// or stack setup creates (CreateRole, a Go method: nodewright never creates
// roles).
//
// Behaviour follows IAM where nodewright depends on it: instance profile
// names are unique per account (EntityAlreadyExists), a profile holds at
// most one role (LimitExceeded), a profile with a role cannot be deleted
// (DeleteConflict), unknown names are NoSuchEntity, paths must begin and
// end with "/", list calls page with Marker/IsTruncated (MaxItems, default
// 100), and listings carry no tags (only GetInstanceProfile returns them),
// as IAM's list operations return a subset of attributes.
package iamsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// iamNamespace is the XML namespace of IAM Query answers.
const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

// DefaultAccountID is the account of New's ARNs when none is given.
const DefaultAccountID = "111122223333"

var (
	namePattern = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	pathPattern = regexp.MustCompile(`^/([\x21-\x7E]{0,510}/)?$`)
)

// Role is an IAM role as GetRole reports it.
type Role struct {
	Name, Path, ARN, ID string
	Created             time.Time
}

// InstanceProfile is an instance profile as GetInstanceProfile reports it.
type InstanceProfile struct {
	Name, Path, ARN, ID string
	Created             time.Time
	// Roles are the names of its roles (at most one).
	Roles []string
	// Tags are its tags in the order they were set.
	Tags []Tag
}

// Tag is one IAM tag.
type Tag struct{ Key, Value string }

// Call is one IAM request the server answered, in arrival order.
type Call struct {
	Action    string
	Params    url.Values
	ErrorCode string
}

// Server is the IAM stand-in. All methods are safe for concurrent use.
type Server struct {
	mu       sync.Mutex
	account  string
	now      func() time.Time
	roles    map[string]*Role
	profiles map[string]*InstanceProfile
	seq      int
	calls    []Call
	injected map[string][]string
}

// New returns an empty IAM for account (empty: DefaultAccountID) whose
// creation dates read now (nil: time.Now).
func New(account string, now func() time.Time) *Server {
	if account == "" {
		account = DefaultAccountID
	}
	if now == nil {
		now = time.Now
	}
	return &Server{account: account, now: now, roles: map[string]*Role{}, profiles: map[string]*InstanceProfile{}, injected: map[string][]string{}}
}

// CreateRole creates role name at path ("" means "/") and returns it; a
// role of that name already there is returned unchanged. Errors: an
// invalid name or path.
func (s *Server) CreateRole(name, path string) (Role, error) {
	if path == "" {
		path = "/"
	}
	if !namePattern.MatchString(name) {
		return Role{}, fmt.Errorf("role name %q: invalid", name)
	}
	if !pathPattern.MatchString(path) {
		return Role{}, fmt.Errorf("role path %q: must begin and end with /", path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.roles[name]; ok {
		return *r, nil
	}
	r := &Role{Name: name, Path: path, ARN: "arn:aws:iam::" + s.account + ":role" + path + name, ID: s.newID("AROA"), Created: s.now().UTC()}
	s.roles[name] = r
	return *r, nil
}

// InstanceProfile returns the instance profile called name, if any.
func (s *Server) InstanceProfile(name string) (InstanceProfile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.profiles[name]
	if !ok {
		return InstanceProfile{}, false
	}
	out := *p
	out.Roles, out.Tags = slices.Clone(p.Roles), slices.Clone(p.Tags)
	return out, true
}

// InstanceProfiles returns every instance profile, by name.
func (s *Server) InstanceProfiles() []InstanceProfile {
	s.mu.Lock()
	names := make([]string, 0, len(s.profiles))
	for n := range s.profiles {
		names = append(names, n)
	}
	s.mu.Unlock()
	slices.Sort(names)
	var out []InstanceProfile
	for _, n := range names {
		if p, ok := s.InstanceProfile(n); ok {
			out = append(out, p)
		}
	}
	return out
}

// ProfileARN returns the ARN (with its path) of the instance profile
// called nameOrARN, or with that ARN, and whether it exists: what EC2
// asks IAM of a launch's IamInstanceProfile (ec2sim's
// SetInstanceProfileLookup).
func (s *Server) ProfileARN(nameOrARN string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasPrefix(nameOrARN, "arn:") {
		for _, p := range s.profiles {
			if p.ARN == nameOrARN {
				return p.ARN, true
			}
		}
		return "", false
	}
	if p, ok := s.profiles[nameOrARN]; ok {
		return p.ARN, true
	}
	return "", false
}

// Calls returns the calls answered so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// InjectError makes the next n calls of action fail with code (HTTP
// status as IAM answers it) before doing anything.
func (s *Server) InjectError(action, code string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.injected[action] = append(s.injected[action], code)
	}
}

func (s *Server) newID(prefix string) string {
	s.seq++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", s.account, prefix, s.seq)))
	return prefix + strings.ToUpper(hex.EncodeToString(sum[:])[:17])
}

// apiError is an IAM error answer.
type apiError struct {
	Code, Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func status(code string) int {
	switch code {
	case "NoSuchEntity":
		return http.StatusNotFound
	case "EntityAlreadyExists", "LimitExceeded", "DeleteConflict":
		return http.StatusConflict
	case "ServiceFailure":
		return http.StatusInternalServerError
	case "Throttling":
		return http.StatusBadRequest
	}
	return http.StatusBadRequest
}

type handler func(s *Server, form url.Values) (any, *apiError)

var actions = map[string]handler{
	"GetRole":                       (*Server).getRole,
	"CreateInstanceProfile":         (*Server).createInstanceProfile,
	"GetInstanceProfile":            (*Server).getInstanceProfile,
	"AddRoleToInstanceProfile":      (*Server).addRole,
	"RemoveRoleFromInstanceProfile": (*Server).removeRole,
	"DeleteInstanceProfile":         (*Server).deleteInstanceProfile,
	"TagInstanceProfile":            (*Server).tagInstanceProfile,
	"ListInstanceProfiles":          (*Server).listInstanceProfiles,
	"ListInstanceProfilesForRole":   (*Server).listInstanceProfilesForRole,
}

// ServeHTTP answers one IAM Query request. It does not check signatures.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, "", &apiError{Code: "MalformedQueryString", Message: err.Error()})
		return
	}
	action := r.Form.Get("Action")
	s.mu.Lock()
	reqID := s.newID("req")
	call := Call{Action: action, Params: url.Values{}}
	for k, v := range r.Form {
		if k != "Action" && k != "Version" {
			call.Params[k] = slices.Clone(v)
		}
	}
	var (
		body any
		ae   *apiError
	)
	if q := s.injected[action]; len(q) > 0 {
		s.injected[action] = q[1:]
		ae = errorf(q[0], "injected %s", q[0])
	} else if h, ok := actions[action]; ok {
		body, ae = h(s, r.Form)
	} else {
		ae = errorf("InvalidAction", "Could not find operation %s for version 2010-05-08", action)
	}
	if ae != nil {
		call.ErrorCode = ae.Code
	}
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if ae != nil {
		writeError(w, reqID, ae)
		return
	}
	writeResponse(w, action, reqID, body)
}

func writeResponse(w http.ResponseWriter, action, reqID string, result any) {
	type meta struct {
		RequestID string `xml:"RequestId"`
	}
	var buf bytes.Buffer
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{Name: xml.Name{Space: iamNamespace, Local: action + "Response"}}
	_ = enc.EncodeToken(start)
	if result != nil {
		if err := enc.EncodeElement(result, xml.StartElement{Name: xml.Name{Local: action + "Result"}}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	_ = enc.EncodeElement(meta{RequestID: reqID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}})
	_ = enc.EncodeToken(start.End())
	_ = enc.Flush()
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", reqID)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// writeError writes IAM's error envelope:
// <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/></ErrorResponse>.
func writeError(w http.ResponseWriter, reqID string, e *apiError) {
	type errXML struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	type respXML struct {
		XMLName   xml.Name `xml:"https://iam.amazonaws.com/doc/2010-05-08/ ErrorResponse"`
		Error     errXML   `xml:"Error"`
		RequestID string   `xml:"RequestId"`
	}
	typ := "Sender"
	if status(e.Code) >= 500 {
		typ = "Receiver"
	}
	raw, _ := xml.Marshal(respXML{Error: errXML{Type: typ, Code: e.Code, Message: e.Message}, RequestID: reqID})
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", reqID)
	w.WriteHeader(status(e.Code))
	_, _ = w.Write(raw)
}

// XML shapes of IAM's answers.
type roleXML struct {
	Path                     string `xml:"Path"`
	RoleName                 string `xml:"RoleName"`
	RoleID                   string `xml:"RoleId"`
	Arn                      string `xml:"Arn"`
	CreateDate               string `xml:"CreateDate"`
	AssumeRolePolicyDocument string `xml:"AssumeRolePolicyDocument"`
}

type tagXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type profileXML struct {
	InstanceProfileID   string    `xml:"InstanceProfileId"`
	Roles               []roleXML `xml:"Roles>member"`
	InstanceProfileName string    `xml:"InstanceProfileName"`
	Path                string    `xml:"Path"`
	Arn                 string    `xml:"Arn"`
	CreateDate          string    `xml:"CreateDate"`
	Tags                []tagXML  `xml:"Tags>member,omitempty"`
}

// ec2TrustPolicy is the URL-encoded trust policy IAM returns for a node
// role (assumed by EC2).
var ec2TrustPolicy = url.QueryEscape(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)

func (r *Role) xml() roleXML {
	return roleXML{Path: r.Path, RoleName: r.Name, RoleID: r.ID, Arn: r.ARN, CreateDate: isoTime(r.Created), AssumeRolePolicyDocument: ec2TrustPolicy}
}

func (s *Server) profileXML(p *InstanceProfile, withTags bool) profileXML {
	x := profileXML{InstanceProfileID: p.ID, InstanceProfileName: p.Name, Path: p.Path, Arn: p.ARN, CreateDate: isoTime(p.Created), Roles: []roleXML{}}
	for _, rn := range p.Roles {
		if r, ok := s.roles[rn]; ok {
			x.Roles = append(x.Roles, r.xml())
		}
	}
	if withTags {
		for _, t := range p.Tags {
			x.Tags = append(x.Tags, tagXML(t))
		}
	}
	return x
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

func required(form url.Values, name string) (string, *apiError) {
	v := form.Get(name)
	if v == "" {
		return "", errorf("ValidationError", "1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(name))
	}
	return v, nil
}

func lowerFirst(s string) string { return strings.ToLower(s[:1]) + s[1:] }

func validName(field, v string) *apiError {
	if !namePattern.MatchString(v) {
		return errorf("ValidationError", "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", v, field)
	}
	return nil
}

func (s *Server) role(form url.Values) (*Role, *apiError) {
	name, ae := required(form, "RoleName")
	if ae != nil {
		return nil, ae
	}
	r, ok := s.roles[name]
	if !ok {
		return nil, errorf("NoSuchEntity", "The role with name %s cannot be found.", name)
	}
	return r, nil
}

func (s *Server) profile(form url.Values) (*InstanceProfile, *apiError) {
	name, ae := required(form, "InstanceProfileName")
	if ae != nil {
		return nil, ae
	}
	p, ok := s.profiles[name]
	if !ok {
		return nil, errorf("NoSuchEntity", "Instance Profile %s cannot be found.", name)
	}
	return p, nil
}

func (s *Server) getRole(form url.Values) (any, *apiError) {
	r, ae := s.role(form)
	if ae != nil {
		return nil, ae
	}
	return struct {
		Role roleXML `xml:"Role"`
	}{r.xml()}, nil
}

// tags decodes Tags.member.N.Key/Value; IAM allows 50 tags, keys of at
// most 128 and values of at most 256 characters, no key twice.
func tags(form url.Values) ([]Tag, *apiError) {
	var out []Tag
	for i := 1; ; i++ {
		k, ok := form["Tags.member."+strconv.Itoa(i)+".Key"]
		if !ok {
			break
		}
		t := Tag{Key: k[0], Value: form.Get("Tags.member." + strconv.Itoa(i) + ".Value")}
		if t.Key == "" || len(t.Key) > 128 || len(t.Value) > 256 {
			return nil, errorf("ValidationError", "Invalid tag %q: keys must be 1 to 128 characters, values at most 256.", t.Key)
		}
		if slices.ContainsFunc(out, func(o Tag) bool { return strings.EqualFold(o.Key, t.Key) }) {
			return nil, errorf("InvalidInput", "Duplicate tag keys found. Please note that Tag keys are case insensitive.")
		}
		out = append(out, t)
	}
	if len(out) > 50 {
		return nil, errorf("LimitExceeded", "Cannot exceed quota for TagsPerInstanceProfile: 50")
	}
	return out, nil
}

func (s *Server) createInstanceProfile(form url.Values) (any, *apiError) {
	name, ae := required(form, "InstanceProfileName")
	if ae != nil {
		return nil, ae
	}
	if ae := validName("instanceProfileName", name); ae != nil {
		return nil, ae
	}
	path := form.Get("Path")
	if path == "" {
		path = "/"
	}
	if !pathPattern.MatchString(path) {
		return nil, errorf("ValidationError", "The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters.")
	}
	tg, ae := tags(form)
	if ae != nil {
		return nil, ae
	}
	if _, ok := s.profiles[name]; ok {
		return nil, errorf("EntityAlreadyExists", "Instance Profile %s already exists.", name)
	}
	p := &InstanceProfile{Name: name, Path: path, ARN: "arn:aws:iam::" + s.account + ":instance-profile" + path + name, ID: s.newID("AIPA"), Created: s.now().UTC(), Tags: tg}
	s.profiles[name] = p
	return struct {
		InstanceProfile profileXML `xml:"InstanceProfile"`
	}{s.profileXML(p, true)}, nil
}

func (s *Server) getInstanceProfile(form url.Values) (any, *apiError) {
	p, ae := s.profile(form)
	if ae != nil {
		return nil, ae
	}
	return struct {
		InstanceProfile profileXML `xml:"InstanceProfile"`
	}{s.profileXML(p, true)}, nil
}

func (s *Server) addRole(form url.Values) (any, *apiError) {
	p, ae := s.profile(form)
	if ae != nil {
		return nil, ae
	}
	r, ae := s.role(form)
	if ae != nil {
		return nil, ae
	}
	if len(p.Roles) >= 1 {
		return nil, errorf("LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	p.Roles = append(p.Roles, r.Name)
	return nil, nil
}

func (s *Server) removeRole(form url.Values) (any, *apiError) {
	p, ae := s.profile(form)
	if ae != nil {
		return nil, ae
	}
	r, ae := s.role(form)
	if ae != nil {
		return nil, ae
	}
	i := slices.Index(p.Roles, r.Name)
	if i < 0 {
		return nil, errorf("NoSuchEntity", "The role with name %s cannot be found.", r.Name)
	}
	p.Roles = slices.Delete(p.Roles, i, i+1)
	return nil, nil
}

func (s *Server) deleteInstanceProfile(form url.Values) (any, *apiError) {
	p, ae := s.profile(form)
	if ae != nil {
		return nil, ae
	}
	if len(p.Roles) > 0 {
		return nil, errorf("DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
	}
	delete(s.profiles, p.Name)
	return nil, nil
}

func (s *Server) tagInstanceProfile(form url.Values) (any, *apiError) {
	p, ae := s.profile(form)
	if ae != nil {
		return nil, ae
	}
	tg, ae := tags(form)
	if ae != nil {
		return nil, ae
	}
	merged := slices.Clone(p.Tags)
	for _, t := range tg {
		if i := slices.IndexFunc(merged, func(o Tag) bool { return strings.EqualFold(o.Key, t.Key) }); i >= 0 {
			merged[i].Value = t.Value
			continue
		}
		merged = append(merged, t)
	}
	if len(merged) > 50 {
		return nil, errorf("LimitExceeded", "Cannot exceed quota for TagsPerInstanceProfile: 50")
	}
	p.Tags = merged
	return nil, nil
}

type listXML struct {
	IsTruncated      bool         `xml:"IsTruncated"`
	Marker           string       `xml:"Marker,omitempty"`
	InstanceProfiles []profileXML `xml:"InstanceProfiles>member"`
}

// page returns the profiles (sorted by name) after the form's Marker, at
// most MaxItems (1 to 1000, default 100), with the next marker.
func (s *Server) page(form url.Values, keep func(*InstanceProfile) bool) (any, *apiError) {
	limit := 100
	if v := form.Get("MaxItems"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return nil, errorf("ValidationError", "1 validation error detected: Value '%s' at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 1000", v)
		}
		limit = n
	}
	after := ""
	if m := form.Get("Marker"); m != "" {
		raw, err := hex.DecodeString(m)
		if err != nil {
			return nil, errorf("ValidationError", "Invalid Marker.")
		}
		after = string(raw)
	}
	names := make([]string, 0, len(s.profiles))
	for n, p := range s.profiles {
		if n > after && keep(p) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := listXML{InstanceProfiles: []profileXML{}}
	for i, n := range names {
		if i == limit {
			out.IsTruncated = true
			out.Marker = hex.EncodeToString([]byte(names[i-1]))
			break
		}
		// Listings carry no tags (IAM: use GetInstanceProfile for them).
		out.InstanceProfiles = append(out.InstanceProfiles, s.profileXML(s.profiles[n], false))
	}
	return out, nil
}

func (s *Server) listInstanceProfiles(form url.Values) (any, *apiError) {
	prefix := form.Get("PathPrefix")
	if prefix == "" {
		prefix = "/"
	}
	if !strings.HasPrefix(prefix, "/") {
		return nil, errorf("ValidationError", "The specified value for pathPrefix is invalid. It must begin with /.")
	}
	return s.page(form, func(p *InstanceProfile) bool { return strings.HasPrefix(p.Path, prefix) })
}

func (s *Server) listInstanceProfilesForRole(form url.Values) (any, *apiError) {
	r, ae := s.role(form)
	if ae != nil {
		return nil, ae
	}
	return s.page(form, func(p *InstanceProfile) bool { return slices.Contains(p.Roles, r.Name) })
}
