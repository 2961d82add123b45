package nodewright

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// outputs returns the template's outputs by construct ID, each value
// rendered as a string:
// Fn::Join parts concatenated, any other intrinsic as <its JSON>.
func outputs(t *testing.T, props Props) map[string]string {
	t.Helper()
	tmpl, _ := mustTemplate(t, props)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Outputs map[string]struct {
			Value any `json:"Value"`
		} `json:"Outputs"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	var render func(v any) string
	render = func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case map[string]any:
			if join, ok := x["Fn::Join"].([]any); ok && len(join) == 2 {
				var parts []string
				for _, p := range join[1].([]any) {
					parts = append(parts, render(p))
				}
				return strings.Join(parts, join[0].(string))
			}
		}
		b, _ := json.Marshal(v)
		return "<" + string(b) + ">"
	}
	// Logical IDs are the construct path plus a hash: NodewrightApiEndpoint1EA7626E.
	out := map[string]string{}
	for id, o := range parsed.Outputs {
		out[strings.TrimPrefix(id[:len(id)-8], "Nodewright")] = render(o.Value)
	}
	return out
}

func TestForwarderImageRepository(t *testing.T) {
	f := newFixture(t)
	tmpl, c := mustTemplate(t, baseProps(f))
	countIs(t, tmpl, "AWS::ECR::Repository", 1)
	hasResource(t, tmpl, "AWS::ECR::Repository", map[string]any{
		"Properties": map[string]any{
			"ImageScanningConfiguration": map[string]any{"ScanOnPush": true},
			"ImageTagMutability":         "IMMUTABLE",
		},
		"DeletionPolicy": "Retain",
	})
	for id, r := range c.ofType("AWS::ECR::Repository") {
		text, _ := r.Properties["LifecyclePolicy"].(map[string]any)["LifecyclePolicyText"].(string)
		var policy struct {
			Rules []struct {
				Selection map[string]any `json:"selection"`
				Action    map[string]any `json:"action"`
			} `json:"rules"`
		}
		if err := json.Unmarshal([]byte(text), &policy); err != nil {
			t.Fatalf("%s lifecycle policy %q: %v", id, text, err)
		}
		want := map[string]any{"tagStatus": "tagged", "tagPatternList": []any{"*"}, "countType": "imageCountMoreThan", "countNumber": float64(imagesKept)}
		if len(policy.Rules) != 1 || policy.Rules[0].Action["type"] != "expire" {
			t.Fatalf("%s lifecycle rules = %+v, want one expire rule", id, policy.Rules)
		}
		if diff := cmp.Diff(want, policy.Rules[0].Selection); diff != "" {
			t.Errorf("%s lifecycle selection (-want +got):\n%s (tagged only, so an index's platform manifests never expire while it is kept)", id, diff)
		}
	}
}

func TestForwarderAlarms(t *testing.T) {
	f := newFixture(t)
	_, c := mustTemplate(t, baseProps(f))
	alarms := map[string]cfnResource{}
	for id, r := range c.ofType("AWS::CloudWatch::Alarm") {
		for _, name := range []string{"ForwarderSilentAlarm", "ApiClientErrorsAlarm"} {
			if strings.HasPrefix(id, "Nodewright"+name) {
				alarms[name] = r
			}
		}
	}

	t.Run("should alarm when no snapshot was posted for 5 minutes, missing data breaching", func(t *testing.T) {
		a, ok := alarms["ForwarderSilentAlarm"]
		if !ok {
			t.Fatal("no ForwarderSilentAlarm")
		}
		if a.Properties["TreatMissingData"] != "breaching" || a.Properties["ComparisonOperator"] != "LessThanThreshold" || a.Properties["Threshold"] != float64(1) ||
			a.Properties["MetricName"] != "Count" || a.Properties["Statistic"] != "Sum" || a.Properties["Period"] != float64(300) {
			t.Errorf("alarm = %v", a.Properties)
		}
		// One metric (refused posts page ApiClientErrorsAlarm and
		// ApiServerErrorsAlarm): the POST /v1/snapshots method's Count.
		dims, _ := json.Marshal(a.Properties["Dimensions"])
		for _, want := range []string{`{"Name":"Resource","Value":"/v1/snapshots"}`, `{"Name":"Method","Value":"POST"}`} {
			if !strings.Contains(string(dims), want) {
				t.Errorf("alarm dimensions lack %s:\n%s", want, dims)
			}
		}
		if _, ok := a.Properties["Metrics"]; ok {
			t.Errorf("alarm is a metric-math alarm (%v), want one metric", a.Properties["Metrics"])
		}
		// The per-method metrics exist only with detailed metrics on that
		// method, whose settings must keep the stage's throttling.
		want := map[string]any{"HttpMethod": "POST", "ResourcePath": "/~1v1~1snapshots", "MetricsEnabled": true, "DataTraceEnabled": false,
			"ThrottlingRateLimit": float64(apiRateLimit), "ThrottlingBurstLimit": float64(apiBurstLimit)}
		found := false
		for _, st := range c.ofType("AWS::ApiGateway::Stage") {
			for _, ms := range st.Properties["MethodSettings"].([]any) {
				found = found || cmp.Equal(want, ms)
			}
		}
		if !found {
			t.Errorf("no stage method setting %v", want)
		}
	})
	t.Run("should alarm on any 4xx answer, missing data breaching", func(t *testing.T) {
		a, ok := alarms["ApiClientErrorsAlarm"]
		if !ok {
			t.Fatal("no ApiClientErrorsAlarm")
		}
		if a.Properties["MetricName"] != "4XXError" || a.Properties["TreatMissingData"] != "breaching" ||
			a.Properties["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || a.Properties["Threshold"] != float64(1) {
			t.Errorf("alarm = %v", a.Properties)
		}
	})
	t.Run("should notify the alarm topic", func(t *testing.T) {
		p := baseProps(f)
		p.AlarmTopicARN = "arn:aws:sns:us-east-1:111122223333:oncall"
		_, c := mustTemplate(t, p)
		for id, r := range c.ofType("AWS::CloudWatch::Alarm") {
			if strings.HasPrefix(id, "NodewrightForwarderSilentAlarm") || strings.HasPrefix(id, "NodewrightApiClientErrorsAlarm") {
				if fmt.Sprint(r.Properties["AlarmActions"]) != "[arn:aws:sns:us-east-1:111122223333:oncall]" {
					t.Errorf("%s actions = %v", id, r.Properties["AlarmActions"])
				}
			}
		}
	})
}

func TestInstallOutputs(t *testing.T) {
	f := newFixture(t)
	t.Run("should output the repository, the push command and the helm command with every value filled in", func(t *testing.T) {
		out := outputs(t, baseProps(f))
		repo := out["ForwarderImageRepositoryUri"]
		if !strings.Contains(repo, "ForwarderImageRepository") {
			t.Fatalf("ForwarderImageRepositoryUri = %s, want the repository's URI", repo)
		}
		push := out["ImagePushCommand"]
		for _, want := range []string{"aws ecr get-login-password --region us-east-1 | make image-login REGISTRY=", " && make image-push IMAGE=" + repo} {
			if !strings.Contains(push, want) {
				t.Errorf("ImagePushCommand = %s, want it to contain %s", push, want)
			}
		}
		helm := out["HelmInstallCommand"]
		for _, want := range []string{
			"helm upgrade --install nodewright charts/nodewright --namespace nodewright --create-namespace",
			" --set settings.clusterName=prod-east ",
			" --set settings.apiEndpoint=https://<",
			" --set image.repository=" + repo,
			` --set image.digest="$(cat dist/image/digest)"`,
		} {
			if !strings.Contains(helm, want) {
				t.Errorf("HelmInstallCommand = %s\nwant it to contain %s", helm, want)
			}
		}
		if strings.Contains(helm, "role-arn") {
			t.Errorf("HelmInstallCommand annotates the ServiceAccount with EKS Pod Identity: %s", helm)
		}
	})
	t.Run("should annotate the ServiceAccount with the forwarder's role under IRSA", func(t *testing.T) {
		p := baseProps(f)
		p.ForwarderOIDCProviderARN = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC"
		helm := outputs(t, p)["HelmInstallCommand"]
		if !strings.Contains(helm, `--set serviceAccount.annotations.eks\.amazonaws\.com/role-arn=<{"Fn::GetAtt":["NodewrightForwarderRole`) {
			t.Errorf("HelmInstallCommand = %s, want the role ARN annotation", helm)
		}
	})
}
