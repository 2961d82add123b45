package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	seedsDir   = "../../shared/apis/v1/testdata/seeds"
	invalidDir = "../../shared/apis/v1/testdata/invalid"
)

func runValidateCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), append([]string{"validate"}, args...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

const validPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
`

const validClass = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: c}}]
`

func TestValidateCommand(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string // stdout
	}{
		{
			// Issue 2's acceptance check: the whole seed tree at once. Its
			// directories are independent clusters (two define a
			// "production" pool), so equal names across them are fine.
			name: "should accept every seed manifest in one call",
			args: []string{"-f", seedsDir},
			want: "warning: " + seedsDir + "/memo/nodepools.yaml#1: NodePool \"resident-ondemand\": spec.disruption.consolidateAfter: not set; Karpenter v1.14.1 requires it when spec.disruption is written, Karpenter HEAD defaults it to \"0s\" (applied here)\n" +
				"warning: " + seedsDir + "/memo/nodepools.yaml#2: NodePool \"batch-spot\": spec.disruption.consolidateAfter: not set; Karpenter v1.14.1 requires it when spec.disruption is written, Karpenter HEAD defaults it to \"0s\" (applied here)\n" +
				"valid: checked 10 NodePools, 7 EC2NodeClasses; 0 errors, 2 warnings\n",
		},
		{
			name: "should accept the guide seed manifests",
			args: []string{"-f", seedsDir + "/guide"},
			want: "valid: checked 7 NodePools, 5 EC2NodeClasses; 0 errors, 0 warnings\n",
		},
		{
			name: "should accept the guide-complete seed manifests",
			args: []string{"-f", seedsDir + "/guide-complete"},
			want: "valid: checked 1 NodePool, 1 EC2NodeClass; 0 errors, 0 warnings\n",
		},
		{
			name: "should accept the memo seed manifests, warning about the v1.14.1 consolidateAfter subtlety",
			args: []string{"-f", seedsDir + "/memo"},
			want: "warning: " + seedsDir + "/memo/nodepools.yaml#1: NodePool \"resident-ondemand\": spec.disruption.consolidateAfter: not set; Karpenter v1.14.1 requires it when spec.disruption is written, Karpenter HEAD defaults it to \"0s\" (applied here)\n" +
				"warning: " + seedsDir + "/memo/nodepools.yaml#2: NodePool \"batch-spot\": spec.disruption.consolidateAfter: not set; Karpenter v1.14.1 requires it when spec.disruption is written, Karpenter HEAD defaults it to \"0s\" (applied here)\n" +
				"valid: checked 2 NodePools, 1 EC2NodeClass; 0 errors, 2 warnings\n",
		},
		{
			name:  "should read stdin and accept a pool whose class is in the input",
			args:  []string{"-f", "-"},
			stdin: validPool + "---\n" + validClass,
			want:  "valid: checked 1 NodePool, 1 EC2NodeClass; 0 errors, 0 warnings\n",
		},
		{
			name:  "should warn, not fail, when the nodeClassRef names a class missing from the input",
			args:  []string{"-f", "-"},
			stdin: validPool,
			want: "warning: stdin#1: NodePool \"default\": spec.template.spec.nodeClassRef.name: EC2NodeClass \"default\" is not in the input (fine if it already exists in the cluster)\n" +
				"valid: checked 1 NodePool; 0 errors, 1 warning\n",
		},
		{
			name:  "should skip other kinds silently",
			args:  []string{"-f", "-"},
			stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
			want:  "valid: no NodePool, EC2NodeClass or NodeClaim found; 0 errors, 0 warnings\n",
		},
		{
			name: "should accept comma-separated -f paths like plan",
			args: []string{"-f", seedsDir + "/guide-complete/nodepool.yaml," + seedsDir + "/guide-complete/ec2nodeclass.yaml"},
			want: "valid: checked 1 NodePool, 1 EC2NodeClass; 0 errors, 0 warnings\n",
		},
		{
			name:  "should warn, not fail, when the input holds no manifest",
			args:  []string{"-f", "-"},
			stdin: "---\n# nothing\n---\n",
			want:  "warning: no manifests found (the input is empty or holds only separators and comments)\nvalid: no NodePool, EC2NodeClass or NodeClaim found; 0 errors, 1 warning\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runValidateCLI(t, tt.stdin, tt.args...)
			if code != 0 {
				t.Errorf("exit code = %d, want 0; stderr:\n%s", code, stderr)
			}
			if diff := cmp.Diff(tt.want, stdout); diff != "" {
				t.Errorf("stdout mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateCommandErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		want     string // stdout
	}{
		{
			name:     "should report every error of an object with its source, kind, name and field path",
			args:     []string{"-f", "-"},
			stdin:    strings.Replace(validPool, "spec:\n  template:", "spec:\n  weight: 0\n  disruption:\n    consolidateAfter: 1m\n    budgets:\n      - {nodes: '0', schedule: '@daily'}\n  template:", 1) + "---\n" + validClass,
			wantCode: 1,
			want: "error: stdin#1: NodePool \"default\": spec.disruption.budgets[0].duration: required when schedule is set\n" +
				"error: stdin#1: NodePool \"default\": spec.weight: 0 is out of range 1..100\n" +
				"invalid: checked 1 NodePool, 1 EC2NodeClass; 2 errors, 0 warnings\n",
		},
		{
			name:     "should refuse a zone requirement spanning two regions and a CRON_TZ budget schedule, naming the fields",
			args:     []string{"-f", "-"},
			stdin:    strings.Replace(strings.Replace(validPool, "values: [spot]}", "values: [spot]}\n        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-west-2b]}", 1), "spec:\n  template:", "spec:\n  disruption:\n    consolidateAfter: 1m\n    budgets:\n      - {nodes: '0', schedule: 'CRON_TZ=Europe/Paris 0 9 * * *', duration: 1h}\n  template:", 1) + "---\n" + validClass,
			wantCode: 1,
			want: "error: stdin#1: NodePool \"default\": spec.template.spec.requirements[1].values[1]: zone \"us-west-2b\" is in region us-west-2 but zone \"us-east-1a\" is in us-east-1; a NodePool's zones must be in the cluster's one region\n" +
				"error: stdin#1: NodePool \"default\": spec.disruption.budgets[0].schedule: \"CRON_TZ=Europe/Paris 0 9 * * *\" is not a valid cron schedule: time zone prefix \"CRON_TZ=Europe/Paris\" is not supported: budget schedules are evaluated in UTC\n" +
				"invalid: checked 1 NodePool, 1 EC2NodeClass; 2 errors, 0 warnings\n",
		},
		{
			name:     "should reject unknown fields as kubectl apply's strict field validation does, and only warn about HEAD-only kubelet keys",
			args:     []string{"-f", "-"},
			stdin:    strings.Replace(validClass, "spec:\n", "spec:\n  kubelet: {maxPods: 110, registryPullQPS: 5}\n  futureField: true\n", 1),
			wantCode: 1,
			want: "error: stdin#1: EC2NodeClass \"default\": spec.futureField: unknown field (not in Karpenter v1.14.1); kubectl apply rejects it (strict field validation)\n" +
				"warning: stdin#1: EC2NodeClass \"default\": spec.kubelet.registryPullQPS: not part of Karpenter v1.14.1's kubelet schema (accepted by newer Karpenter); kept but not used by nodewright\n" +
				"invalid: checked 1 EC2NodeClass; 1 error, 1 warning\n",
		},
		{
			name:     "should reject a misspelt field that would silently keep its default (consolidateAftr)",
			args:     []string{"-f", "-"},
			stdin:    strings.Replace(validPool, "spec:\n  template:", "spec:\n  disruption:\n    consolidateAftr: 2m\n  template:", 1) + "---\n" + validClass,
			wantCode: 1,
			want: "error: stdin#1: NodePool \"default\": spec.disruption.consolidateAftr: unknown field (not in Karpenter v1.14.1); kubectl apply rejects it (strict field validation)\n" +
				"invalid: checked 1 NodePool, 1 EC2NodeClass; 1 error, 0 warnings\n",
		},
		{
			name:     "should reject a typo in a workload's field too (resource for resources)",
			args:     []string{"-f", "-"},
			stdin:    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n        - name: c\n          resource: {requests: {cpu: '1'}}\n",
			wantCode: 1,
			want: "error: stdin#1: Deployment \"d\": spec.template.spec.containers[0].resource: unknown field (not in the Kubernetes API); kubectl apply rejects it (strict field validation)\n" +
				"invalid: no NodePool, EC2NodeClass or NodeClaim found; 1 error, 0 warnings\n",
		},
		{
			name:     "should reject a Karpenter kind in an API version Karpenter v1 does not serve",
			args:     []string{"-f", "-"},
			stdin:    "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\nspec: {}\n",
			wantCode: 1,
			want: "error: stdin#1: NodePool \"old\": apiVersion: karpenter.sh/v1beta1 NodePool is not supported (only karpenter.sh/v1 and karpenter.k8s.aws/v1); Karpenter v1.14.1's CRDs do not serve it (kubectl apply fails with no matches for kind)\n" +
				"invalid: no NodePool, EC2NodeClass or NodeClaim found; 1 error, 0 warnings\n",
		},
		{
			name:     "should report a document that does not decode and still check the others",
			args:     []string{"-f", "-"},
			stdin:    "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {weight: heavy}\n---\n" + validClass,
			wantCode: 1,
			want: "error: stdin#1: NodePool \"x\": spec.weight: expected an integer, got string\n" +
				"error: stdin#1: NodePool \"x\": spec.template.spec.requirements: required\n" +
				"error: stdin#1: NodePool \"x\": spec.template.spec.nodeClassRef: required\n" +
				"invalid: checked 1 NodePool, 1 EC2NodeClass; 3 errors, 0 warnings\n",
		},
		{
			name: "should report a type error and still validate the other fields of the object, counting it",
			args: []string{"-f", "-"},
			stdin: strings.NewReplacer("spec:\n  template:", "spec:\n  weight: 500\n  limits: {cpu: lots, memory: many}\n  template:",
				"[spot]}\n", "[spot]}\n        - {key: kubernetes.io/arch, operator: Equals, values: [amd64]}\n").Replace(validPool) + "---\n" + validClass,
			wantCode: 1,
			want: "error: stdin#1: NodePool \"default\": spec.limits[cpu]: expected a quantity such as \"500m\", \"4\" or \"16Gi\"\n" +
				"error: stdin#1: NodePool \"default\": spec.limits[memory]: expected a quantity such as \"500m\", \"4\" or \"16Gi\"\n" +
				"error: stdin#1: NodePool \"default\": spec.template.spec.requirements[1].operator: \"Equals\" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte\n" +
				"error: stdin#1: NodePool \"default\": spec.weight: 500 is out of range 1..100\n" +
				"invalid: checked 1 NodePool, 1 EC2NodeClass; 4 errors, 0 warnings\n",
		},
		{
			name:     "should not warn that a class is missing when it is in the input but does not decode",
			args:     []string{"-f", "-"},
			stdin:    validPool + "---\n" + validClass + "  associatePublicIPAddress: \"yes\"\n",
			wantCode: 1,
			want: "error: stdin#2: EC2NodeClass \"default\": spec.associatePublicIPAddress: expected true or false, got string\n" +
				"invalid: checked 1 NodePool, 1 EC2NodeClass; 1 error, 0 warnings\n",
		},
		{
			name:     "should report objects of one kind with the same name, as plan does",
			args:     []string{"-f", "-"},
			stdin:    validPool + "---\n" + validClass + "---\n" + validPool,
			wantCode: 1,
			want: "error: stdin#3: NodePool \"default\": duplicate of stdin#1\n" +
				"invalid: checked 2 NodePools, 1 EC2NodeClass; 1 error, 0 warnings\n",
		},
		{
			name:     "should fail on a path that does not exist",
			args:     []string{"-f", "does-not-exist.yaml"},
			wantCode: 1,
			want: "error: manifest path: stat does-not-exist.yaml: no such file or directory\n" +
				"invalid: no NodePool, EC2NodeClass or NodeClaim found; 1 error, 0 warnings\n",
		},
		{name: "should exit 2 without -f", wantCode: 2},
		{name: "should exit 2 for a positional argument", args: []string{"pools.yaml"}, wantCode: 2},
		{name: "should exit 2 for an unknown flag", args: []string{"--file", "x"}, wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runValidateCLI(t, tt.stdin, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if diff := cmp.Diff(tt.want, stdout); diff != "" {
				t.Errorf("stdout mismatch (-want +got):\n%s", diff)
			}
			if tt.wantCode == 2 && !strings.Contains(stderr, "usage: nodewright validate") {
				t.Errorf("stderr = %q, want the usage", stderr)
			}
		})
	}
}

// invalidCase is one file of the invalid-manifest corpus.
type invalidCase struct {
	file string
	desc string // "# Invalid: ..." header
	want string // "# want: ..." header
}

func readInvalidCases(t *testing.T) []invalidCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(invalidDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []invalidCase
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		c := invalidCase{file: f}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := sc.Text()
			if d, ok := strings.CutPrefix(line, "# Invalid: "); ok {
				c.desc = d
			}
			if w, ok := strings.CutPrefix(line, "# want: "); ok {
				c.want = w
			}
		}
		fh.Close()
		if c.desc == "" || c.want == "" {
			t.Fatalf("%s: missing the '# Invalid:' or '# want:' header", f)
		}
		cases = append(cases, c)
	}
	return cases
}

// TestValidateInvalidManifests runs every file of the invalid corpus through
// "nodewright validate": each must exit 1 and report its field path on an
// error line.
func TestValidateInvalidManifests(t *testing.T) {
	cases := readInvalidCases(t)
	if len(cases) < 40 {
		t.Fatalf("found %d invalid manifests in %s, want at least 40", len(cases), invalidDir)
	}
	for _, c := range cases {
		t.Run("should reject "+strings.TrimSuffix(c.desc, "."), func(t *testing.T) {
			code, stdout, stderr := runValidateCLI(t, "", "-f", c.file)
			if code != 1 {
				t.Errorf("exit code = %d, want 1; stdout:\n%s%s", code, stdout, stderr)
			}
			var errLines []string
			for _, line := range strings.Split(stdout, "\n") {
				if strings.HasPrefix(line, "error: "+c.file+"#") {
					errLines = append(errLines, line)
				}
			}
			found := false
			for _, line := range errLines {
				found = found || strings.Contains(line, c.want)
			}
			if !found {
				t.Errorf("no error line reports %q; stdout:\n%s", c.want, stdout)
			}
		})
	}
}
