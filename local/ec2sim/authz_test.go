package ec2sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/local/ec2sim"
)

// dryRunCalls are the three calls of a class's authorization check, as
// dry runs tagged with the class's tags.
func dryRunCalls(t *testing.T, e *env, lt, subnet string, tags []ec2types.Tag) map[string]func() error {
	image := e.al2023(t, "x86_64")
	return map[string]func() error{
		"CreateLaunchTemplate": func() error {
			_, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{
				DryRun: aws.Bool(true), LaunchTemplateName: aws.String(lt),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image)},
				TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}},
			})
			return err
		},
		"CreateFleet": func() error {
			in := fleetInput(lt, "on-demand", 1, []string{"m5.large"}, []string{subnet})
			in.DryRun = aws.Bool(true)
			in.TagSpecifications = []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}}
			_, err := e.ec2.CreateFleet(t.Context(), in)
			return err
		},
		"RunInstances": func() error {
			_, err := e.ec2.RunInstances(t.Context(), &ec2.RunInstancesInput{
				DryRun: aws.Bool(true), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeM5Large,
				LaunchTemplate:    &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
				SubnetId:          aws.String(subnet),
				TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
			})
			return err
		},
	}
}

func TestDryRunAnswersDryRunOperationAndCreatesNothing(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "existing", e.al2023(t, "x86_64"), "#!/bin/bash")
	subnet := e.subnets()["us-east-1a"]
	tags := []ec2types.Tag{{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}}
	templates, fleets := len(e.sim.LaunchTemplates()), len(e.sim.Fleets())
	for action, call := range dryRunCalls(t, e, "existing", subnet, tags) {
		code, status := apiCode(call())
		if code != "DryRunOperation" || status != http.StatusPreconditionFailed {
			t.Errorf("%s dry run: %s %d, want DryRunOperation 412", action, code, status)
		}
	}
	if len(e.sim.LaunchTemplates()) != templates || len(e.sim.Fleets()) != fleets || len(e.sim.Instances()) != 0 {
		t.Errorf("dry runs created something: %d templates (was %d), %d fleets (was %d), %d instances",
			len(e.sim.LaunchTemplates()), templates, len(e.sim.Fleets()), fleets, len(e.sim.Instances()))
	}
	// A dry run of a new template name creates no template either.
	call := dryRunCalls(t, e, "brand-new", subnet, tags)["CreateLaunchTemplate"]
	if code, _ := apiCode(call()); code != "DryRunOperation" {
		t.Errorf("CreateLaunchTemplate dry run of a new name: %s, want DryRunOperation", code)
	}
	if _, ok := e.sim.LaunchTemplate("brand-new"); ok {
		t.Error("a dry run created launch template brand-new")
	}
}

func TestDenialAnswersUnauthorizedOperation(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "existing", e.al2023(t, "x86_64"), "#!/bin/bash")
	subnet := e.subnets()["us-east-1a"]
	mine := []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("a")}}
	theirs := []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("b")}}
	for _, action := range []string{"CreateLaunchTemplate", "CreateFleet", "RunInstances"} {
		t.Run(action, func(t *testing.T) {
			if err := e.sim.Deny(ec2sim.Denial{Action: action, RequestTags: map[string]string{"team": "a"}}); err != nil {
				t.Fatalf("Deny: %v", err)
			}
			err := dryRunCalls(t, e, "existing", subnet, mine)[action]()
			code, status := apiCode(err)
			if code != "UnauthorizedOperation" || status != http.StatusForbidden {
				t.Fatalf("denied dry run: %s %d (%v), want UnauthorizedOperation 403", code, status, err)
			}
			for _, want := range []string{"not authorized to perform: ec2:" + action, "Encoded authorization failure message: "} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
			// The condition on the request's tags: other tags pass.
			if code, _ := apiCode(dryRunCalls(t, e, "existing", subnet, theirs)[action]()); code != "DryRunOperation" {
				t.Errorf("dry run with other tags: %s, want DryRunOperation", code)
			}
			e.sim.Allow(action)
			if code, _ := apiCode(dryRunCalls(t, e, "existing", subnet, mine)[action]()); code != "DryRunOperation" {
				t.Errorf("dry run after Allow: %s, want DryRunOperation", code)
			}
		})
	}
	if err := e.sim.Deny(ec2sim.Denial{Action: "DescribeImages"}); err == nil {
		t.Error("Deny(DescribeImages) = nil, want an error naming the action")
	}
}

func TestDeniedCreateFleetLaunchesNothing(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "existing", e.al2023(t, "x86_64"), "#!/bin/bash")
	if err := e.sim.Deny(ec2sim.Denial{Action: "CreateFleet"}); err != nil {
		t.Fatal(err)
	}
	_, err := e.ec2.CreateFleet(t.Context(), fleetInput("existing", "on-demand", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1a"]}))
	if code, _ := apiCode(err); code != "UnauthorizedOperation" {
		t.Fatalf("denied CreateFleet: %s, want UnauthorizedOperation", code)
	}
	if len(e.sim.Instances()) != 0 || len(e.sim.Fleets()) != 0 {
		t.Errorf("a denied CreateFleet launched %d instances, %d fleets", len(e.sim.Instances()), len(e.sim.Fleets()))
	}
}

// Parameter errors come before the permission check, denied or not.
func TestDryRunValidatesParametersFirst(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	subnet := e.subnets()["us-east-1a"]
	for _, action := range []string{"CreateFleet", "RunInstances", "CreateLaunchTemplate"} {
		if err := e.sim.Deny(ec2sim.Denial{Action: action}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, want string
		call       func() error
	}{
		{"fleet: unknown launch template", "InvalidLaunchTemplateName.NotFoundException", func() error {
			in := fleetInput("missing", "on-demand", 1, []string{"m5.large"}, []string{subnet})
			in.DryRun = aws.Bool(true)
			_, err := e.ec2.CreateFleet(t.Context(), in)
			return err
		}},
		{"run: MinCount above MaxCount", "InvalidParameterValue", func() error {
			_, err := e.ec2.RunInstances(t.Context(), &ec2.RunInstancesInput{DryRun: aws.Bool(true), MinCount: aws.Int32(2), MaxCount: aws.Int32(1), ImageId: aws.String(e.al2023(t, "x86_64"))})
			return err
		}},
		{"run: unknown subnet", "InvalidSubnetID.NotFound", func() error {
			_, err := e.ec2.RunInstances(t.Context(), &ec2.RunInstancesInput{DryRun: aws.Bool(true), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				ImageId: aws.String(e.al2023(t, "x86_64")), SubnetId: aws.String("subnet-0000000000000dead")})
			return err
		}},
		{"template: malformed name", "InvalidLaunchTemplateName.MalformedException", func() error {
			_, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{DryRun: aws.Bool(true), LaunchTemplateName: aws.String("x"),
				LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-12345678")}})
			return err
		}},
	}
	for _, c := range cases {
		if code, _ := apiCode(c.call()); code != c.want {
			t.Errorf("%s: %s, want %s", c.name, code, c.want)
		}
	}
	// RunInstances without DryRun launches nothing: the simulator launches
	// through CreateFleet.
	e.sim.Allow("RunInstances")
	e.sim.Allow("CreateLaunchTemplate")
	e.createLT(t, "existing", e.al2023(t, "x86_64"), "#!/bin/bash")
	_, err := e.ec2.RunInstances(t.Context(), &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeM5Large,
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String("existing")}})
	if code, _ := apiCode(err); code != "UnsupportedOperation" || len(e.sim.Instances()) != 0 {
		t.Errorf("RunInstances without DryRun: %s, %d instances; want UnsupportedOperation, none", code, len(e.sim.Instances()))
	}
}

func TestDenyControlAPI(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	post := func(method, body string) int {
		req, _ := http.NewRequestWithContext(t.Context(), method, e.url+"/_sim/deny", bytes.NewBufferString(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(http.MethodPost, `{"action":"CreateFleet","requestTags":{"team":"a"}}`); got != http.StatusNoContent {
		t.Fatalf("POST /_sim/deny: %d", got)
	}
	if got := post(http.MethodPost, `{"action":"TerminateInstances"}`); got != http.StatusBadRequest {
		t.Errorf("POST /_sim/deny TerminateInstances: %d, want 400", got)
	}
	resp, err := http.Get(e.url + "/_sim/deny")
	if err != nil {
		t.Fatal(err)
	}
	var got []ec2sim.Denial
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if len(got) != 1 || got[0].Action != "CreateFleet" || got[0].RequestTags["team"] != "a" {
		t.Errorf("GET /_sim/deny = %+v", got)
	}
	if post(http.MethodDelete, `{"action":"CreateFleet"}`); len(e.sim.Denials()) != 0 {
		t.Errorf("after DELETE: %+v", e.sim.Denials())
	}
}

// Dry runs are calls (Calls) but not launches: CallsTo and answer faults
// leave them out.
func TestDryRunsAreLeftOutOfCallsToAndAnswerFaults(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	e.createLT(t, "existing", e.al2023(t, "x86_64"), "#!/bin/bash")
	e.sim.DropAnswers("CreateFleet", 1)
	in := fleetInput("existing", "on-demand", 1, []string{"m5.large"}, []string{e.subnets()["us-east-1a"]})
	in.DryRun = aws.Bool(true)
	if _, err := e.ec2.CreateFleet(t.Context(), in); err == nil {
		t.Fatal("dry run: nil error")
	} else if code, _ := apiCode(err); code != "DryRunOperation" {
		t.Fatalf("dry run with a queued drop: %v, want DryRunOperation", err)
	}
	if n := len(e.sim.CallsTo("CreateFleet")); n != 0 {
		t.Errorf("CallsTo(CreateFleet) = %d after a dry run, want 0", n)
	}
	if n := len(e.sim.Calls()); n == 0 || !e.sim.Calls()[n-1].DryRun() {
		t.Errorf("Calls() lacks the dry run")
	}
}
