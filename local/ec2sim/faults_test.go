package ec2sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/aws/awserr"
)

func TestThrottleIsSeenByTheSDK(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.sim.Throttle("DescribeInstances", 1)
	_, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{})
	if code, status := apiCode(err); code != "RequestLimitExceeded" || status != http.StatusServiceUnavailable || awserr.Classify(err) != awserr.Throttled {
		t.Errorf("throttled DescribeInstances: code %s, status %d, class %v; want RequestLimitExceeded, 503, Throttled", code, status, awserr.Classify(err))
	}
	if _, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("DescribeInstances() after the throttled call: error = %v", err)
	}

	e.sim.Throttle("GetParameter", 1)
	_, err = e.ssm.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id")})
	if code, _ := apiCode(err); code != "ThrottlingException" || awserr.Classify(err) != awserr.Throttled {
		t.Errorf("throttled GetParameter: error = %v, want ThrottlingException", err)
	}
}

func TestThrottledCallsAreRetriedBySDK(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.sim.Throttle("DescribeSubnets", 2)
	if _, err := e.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{}, withRetries); err != nil {
		t.Fatalf("DescribeSubnets() with 3 attempts and 2 throttles: error = %v", err)
	}
	var codes []string
	for _, c := range e.sim.CallsTo("DescribeSubnets") {
		codes = append(codes, c.ErrorCode)
	}
	if diff := cmp.Diff([]string{"RequestLimitExceeded", "RequestLimitExceeded", ""}, codes); diff != "" {
		t.Errorf("recorded DescribeSubnets calls mismatch (-want +got):\n%s", diff)
	}
}

func TestInjectError(t *testing.T) {
	tests := []struct {
		name       string
		code       string
		wantStatus int
		wantClass  awserr.Class
	}{
		{name: "missing permission", code: "UnauthorizedOperation", wantStatus: http.StatusForbidden, wantClass: awserr.Unauthorized},
		{name: "bad credentials", code: "AuthFailure", wantStatus: http.StatusUnauthorized, wantClass: awserr.Unauthorized},
		{name: "internal error", code: "InternalError", wantStatus: http.StatusInternalServerError, wantClass: awserr.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, ec2sim.Options{})
			e.createLT(t, "amd64", e.al2023(t, "x86_64"), "")
			e.sim.InjectError("CreateFleet", tt.code, 1)
			_, err := e.ec2.CreateFleet(t.Context(), fleetInput("amd64", "on-demand", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]}))
			if code, status := apiCode(err); code != tt.code || status != tt.wantStatus || awserr.Classify(err) != tt.wantClass {
				t.Errorf("CreateFleet(): code %s, status %d, class %v; want %s, %d, %v", code, status, awserr.Classify(err), tt.code, tt.wantStatus, tt.wantClass)
			}
			if n := len(e.sim.Instances()); n != 0 {
				t.Errorf("%d instances launched by a failed call, want 0", n)
			}
		})
	}
}

func TestUnknownActionsFail(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	resp, err := http.PostForm(e.url, url.Values{"Action": {"RunScheduledInstances"}, "Version": {"2016-11-15"}})
	if err != nil {
		t.Fatalf("POST error = %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "<Code>InvalidAction</Code>") {
		t.Errorf("RunScheduledInstances: %d %s, want 400 InvalidAction", resp.StatusCode, body)
	}

	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{"Name":"/x"}`))
	req.Header.Set("X-Amz-Target", "AmazonSSM.PutParameter")
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST error = %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Amzn-ErrorType") != "InvalidAction" {
		t.Errorf("SSM PutParameter: %d %s, want 400 InvalidAction", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"))
	}
}

// control sends one control request and decodes a JSON answer into out
// (when not nil); it returns the status.
func (e *env) control(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest() error = %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s error = %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode answer: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func TestControlAPI(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "amd64", e.al2023(t, "x86_64"), "#cloud-config\n")
	launch := func() (*ec2.CreateFleetOutput, error) {
		return e.ec2.CreateFleet(t.Context(), fleetInput("amd64", "spot", 1, []string{"c5.large"}, []string{e.subnets()["us-east-1a"]}))
	}

	steps := []struct {
		method, path, body string
		wantStatus         int
	}{
		{http.MethodPost, "/_sim/unavailable", `{"instanceType":"c5.large","zone":"us-east-1a","capacityType":"spot"}`, http.StatusNoContent},
		{http.MethodPost, "/_sim/boot-delay", `{"delay":"45s"}`, http.StatusNoContent},
		{http.MethodPost, "/_sim/throttle", `{"action":"DescribeImages","count":1}`, http.StatusNoContent},
		{http.MethodPost, "/_sim/errors", `{"action":"DescribeSubnets","code":"InternalError","count":1}`, http.StatusNoContent},
		{http.MethodPost, "/_sim/spot-price", `{"instanceType":"m5.large","zone":"us-east-1a","price":0.01}`, http.StatusNoContent},
		{http.MethodPut, "/_sim/parameters", `{"name":"/custom/ami","value":"ami-12345678"}`, http.StatusNoContent},
		{http.MethodPost, "/_sim/subnets/" + e.subnets()["us-east-1b"] + "/available-ips", `{"count":7}`, http.StatusNoContent},
		{http.MethodPost, "/_sim/subnets/subnet-0123456789abcdef0/available-ips", `{"count":7}`, http.StatusBadRequest},
		{http.MethodPost, "/_sim/unavailable", `{"instanceType":"c5.large","bogus":1}`, http.StatusBadRequest},
		{http.MethodPost, "/_sim/boot-delay", `{"delay":"soon"}`, http.StatusBadRequest},
		{http.MethodGet, "/_sim/nothing", ``, http.StatusNotFound},
	}
	for _, st := range steps {
		if got := e.control(t, st.method, st.path, st.body, nil); got != st.wantStatus {
			t.Errorf("%s %s = %d, want %d", st.method, st.path, got, st.wantStatus)
		}
	}

	var net ec2sim.Network
	if got := e.control(t, http.MethodGet, "/_sim/network", "", &net); got != http.StatusOK || net.Subnets[1].AvailableIPs != 7 {
		t.Errorf("GET /_sim/network = %d, subnet b free addresses %d; want 7", got, net.Subnets[1].AvailableIPs)
	}
	out, err := launch()
	if err != nil || len(out.Instances) != 0 || len(out.Errors) != 1 {
		t.Fatalf("CreateFleet() with the offering unavailable = %v, %v; want one error and no instance", fleetErrors(out), err)
	}
	if got := e.control(t, http.MethodDelete, "/_sim/unavailable", `{"instanceType":"c5.large","zone":"us-east-1a","capacityType":"spot"}`, nil); got != http.StatusNoContent {
		t.Fatalf("DELETE /_sim/unavailable = %d", got)
	}
	out, err = launch()
	if err != nil || len(instanceIDs(out)) != 1 {
		t.Fatalf("CreateFleet() after clearing = %v, %v; want one instance", fleetErrors(out), err)
	}
	id := instanceIDs(out)[0]
	if e.param(t, "/custom/ami") != "ami-12345678" {
		t.Error("PUT /_sim/parameters did not create the parameter")
	}

	var listed []ec2sim.Instance
	if got := e.control(t, http.MethodGet, "/_sim/instances", "", &listed); got != http.StatusOK || len(listed) != 1 ||
		listed[0].State != "pending" || string(listed[0].UserData) != "#cloud-config\n" {
		t.Errorf("GET /_sim/instances = %d %+v, want the pending instance with its user data", got, listed)
	}
	var clock struct{ Now time.Time }
	if got := e.control(t, http.MethodPost, "/_sim/clock/advance", `{"by":"45s"}`, &clock); got != http.StatusOK || !clock.Now.Equal(epoch.Add(45*time.Second)) {
		t.Errorf("POST /_sim/clock/advance = %d %v", got, clock.Now)
	}
	var one ec2sim.Instance
	if got := e.control(t, http.MethodGet, "/_sim/instances/"+id, "", &one); got != http.StatusOK || one.State != "running" {
		t.Errorf("GET /_sim/instances/%s = %d, state %s; want running", id, got, one.State)
	}
	var warning ec2sim.SpotInterruption
	if got := e.control(t, http.MethodPost, "/_sim/instances/"+id+"/interrupt", "", &warning); got != http.StatusOK || warning.InstanceID != id {
		t.Errorf("POST interrupt = %d %+v", got, warning)
	}
	var warnings []ec2sim.SpotInterruption
	if got := e.control(t, http.MethodGet, "/_sim/interruptions", "", &warnings); got != http.StatusOK || len(warnings) != 1 {
		t.Errorf("GET /_sim/interruptions = %d %+v", got, warnings)
	}
	if got := e.control(t, http.MethodGet, "/_sim/instances/i-0123456789abcdef0", "", nil); got != http.StatusNotFound {
		t.Errorf("GET unknown instance = %d, want 404", got)
	}

	_, err = e.ec2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{})
	if code, _ := apiCode(err); code != "RequestLimitExceeded" {
		t.Errorf("DescribeImages() after POST /_sim/throttle: error = %v", err)
	}
	_, err = e.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{})
	if code, _ := apiCode(err); code != "InternalError" {
		t.Errorf("DescribeSubnets() after POST /_sim/errors: error = %v", err)
	}

	wall, err := ec2sim.New(ec2sim.Options{Clock: wallClock{}})
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	rec := httptest.NewRecorder()
	wall.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/_sim/clock/advance", strings.NewReader(`{"by":"1m"}`)))
	if rec.Code != http.StatusConflict {
		t.Errorf("advancing a wall clock = %d, want 409", rec.Code)
	}
}

// wallClock is a Clock that cannot be advanced.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func TestControlAPIListsItsRoutesAndRegistersImages(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	var list struct {
		Routes []string `json:"routes"`
	}
	if got := e.control(t, http.MethodGet, "/_sim", "", &list); got != http.StatusOK {
		t.Fatalf("GET /_sim = %d, want 200", got)
	}
	joined := strings.Join(list.Routes, "\n")
	for _, want := range []string{"POST   /_sim/images", "POST   /_sim/instances/{id}/interrupt", "GET    /_sim/fleets"} {
		if !strings.Contains(joined, want) {
			t.Errorf("GET /_sim lacks %q:\n%s", want, joined)
		}
	}
	var img ec2sim.Image
	body := `{"name":"amazon-eks-node-al2023-x86_64-standard-1.34-v20991231","architecture":"x86_64","ownerAlias":"amazon"}`
	if got := e.control(t, http.MethodPost, "/_sim/images", body, &img); got != http.StatusOK || !strings.HasPrefix(img.ID, "ami-") {
		t.Fatalf("POST /_sim/images = %d, image %+v; want 200 and an AMI id", got, img)
	}
	out, err := e.ec2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{img.ID}})
	if err != nil || len(out.Images) != 1 {
		t.Errorf("DescribeImages(%s) = %d images, %v; want the registered one", img.ID, len(out.Images), err)
	}
	if got := e.control(t, http.MethodPost, "/_sim/images", `{"architecture":"x86_64"}`, nil); got != http.StatusBadRequest {
		t.Errorf("POST /_sim/images without a name = %d, want 400", got)
	}
}

func TestDroppedAnswerTakesEffectAndTheSameRequestGetsItBack(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "amd64", e.al2023(t, "x86_64"), "")
	in := fleetInput("amd64", "on-demand", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1a"]})
	in.ClientToken = aws.String("nodewright-lost-answer")
	e.sim.DropAnswers("CreateFleet", 1)

	if _, err := e.ec2.CreateFleet(t.Context(), in); err == nil {
		t.Fatal("CreateFleet() with its answer dropped succeeded, want a transport error")
	} else if code, _ := apiCode(err); code != "" {
		t.Fatalf("CreateFleet() with its answer dropped: error = %v, want a transport error, not API error %s", err, code)
	}
	if n := len(e.sim.Instances()); n != 1 {
		t.Fatalf("instances after the dropped answer = %d, want 1 (the call took effect)", n)
	}
	got, err := e.ec2.CreateFleet(t.Context(), in)
	if err != nil {
		t.Fatalf("CreateFleet() again: error = %v, want the first answer", err)
	}
	if ids := instanceIDs(got); len(ids) != 1 || ids[0] != e.sim.Instances()[0].ID || len(e.sim.Instances()) != 1 {
		t.Errorf("the repeat got %v with %d instances, want the first call's instance and no other", ids, len(e.sim.Instances()))
	}
	var faults []string
	for _, c := range e.sim.CallsTo("CreateFleet") {
		faults = append(faults, c.AnswerFault)
	}
	if diff := cmp.Diff([]string{"dropped", ""}, faults); diff != "" {
		t.Errorf("recorded answer faults mismatch (-want +got):\n%s", diff)
	}
}

func TestDelayedAnswerOutlivesTheCallersTimeout(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.sim.DelayAnswers("DescribeSubnets", 2*time.Second, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := e.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DescribeSubnets() with a late answer: error = %v, want the caller's deadline", err)
	}
	if _, err := e.ec2.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{}); err != nil {
		t.Errorf("DescribeSubnets() after the delayed one: error = %v", err)
	}
}
