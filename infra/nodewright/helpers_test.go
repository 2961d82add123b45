package nodewright

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// repoRoot is the repository, two levels up from this package.
var repoRoot = filepath.Join("..", "..")

// fixture is a directory laid out like the repository after `make build`:
// dist/<fn>/bootstrap for every function of the table (a few bytes: CDK
// only hashes and copies them), the repository's real state machines and
// table schema, plus any extra state machines a test adds.
type fixture struct {
	dir string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	f := fixture{dir: t.TempDir()}
	for _, fn := range functions {
		f.writeFile(t, filepath.Join("dist", fn.name, "bootstrap"), "#!/bin/false\n")
	}
	real, err := filepath.Glob(filepath.Join(repoRoot, "statemachines", "*"+aslSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range real {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f.writeFile(t, filepath.Join("statemachines", filepath.Base(p)), string(raw))
	}
	if err := os.MkdirAll(filepath.Join(f.dir, "statemachines"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A state machine a function starts but the repository does not have
	// yet (New fails on it, so `make synth` does) is stood in for by a
	// fixture here, like the bootstraps.
	for _, fn := range functions {
		for _, machine := range slices.Concat(slices.Collect(maps.Values(fn.starts)), fn.continues) {
			if _, err := os.Stat(filepath.Join(f.dir, "statemachines", machine+aslSuffix)); err != nil {
				f.addStateMachine(t, machine, filepath.Join("testdata", "sample.asl.json"))
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "shared", "aws", "ddbstore", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	f.writeFile(t, "schema.json", string(raw))
	return f
}

func (f fixture) writeFile(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(f.dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// addStateMachine copies the ASL file src into the fixture as
// statemachines/<name>.asl.json.
func (f fixture) addStateMachine(t *testing.T, name, src string) {
	t.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f.writeFile(t, filepath.Join("statemachines", name+aslSuffix), string(raw))
}

func (f fixture) assets() Assets {
	return Assets{
		DistDir:         filepath.Join(f.dir, "dist"),
		StateMachineDir: filepath.Join(f.dir, "statemachines"),
		TableSchema:     filepath.Join(f.dir, "schema.json"),
	}
}

// baseProps is a typical deployment: cluster given by name only (so the
// endpoint, CA and version come from the deploy-time lookup), interruption
// on, defaults elsewhere.
func baseProps(f fixture) Props {
	return Props{
		Cluster:             Cluster{Name: "prod-east"},
		Assets:              f.assets(),
		Interruption:        true,
		LogRetentionDays:    30,
		LogLevel:            "info",
		ReservedConcurrency: true,
	}
}

// synth builds props in a fresh app and stack and returns the stack, or
// New's error.
func synth(t *testing.T, props Props) (awscdk.Stack, error) {
	t.Helper()
	return synthIn(t, props, &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("us-east-1")})
}

// synthIn is synth in the environment env; nil makes the stack
// environment-agnostic, as `cdk synth` without credentials does.
func synthIn(t *testing.T, props Props, env *awscdk.Environment) (awscdk.Stack, error) {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("Test"), &awscdk.StackProps{Env: env})
	_, err := New(stack, "Nodewright", props)
	return stack, err
}

// mustTemplate synthesizes props and returns the template as JSON.
func mustTemplate(t *testing.T, props Props) (assertions.Template, cfnTemplate) {
	t.Helper()
	stack, err := synth(t, props)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var parsed cfnTemplate
	if err := json.Unmarshal(raw, &parsed); err != nil {
		t.Fatal(err)
	}
	return tmpl, parsed
}

// cfnTemplate is the part of a CloudFormation template the tests read.
type cfnTemplate struct {
	Resources map[string]cfnResource `json:"Resources"`
}

type cfnResource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

// ofType returns the resources of type typ by logical ID.
func (c cfnTemplate) ofType(typ string) map[string]cfnResource {
	out := map[string]cfnResource{}
	for id, r := range c.Resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

// CDK's assertions panic on failure, which would end the whole test
// binary; these report the failure as a test error instead.

func assert(t *testing.T, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	assertion()
}

func hasProps(t *testing.T, tmpl assertions.Template, typ string, props any) {
	t.Helper()
	assert(t, func() { tmpl.HasResourceProperties(jsii.String(typ), props) })
}

func hasResource(t *testing.T, tmpl assertions.Template, typ string, props any) {
	t.Helper()
	assert(t, func() { tmpl.HasResource(jsii.String(typ), props) })
}

func countIs(t *testing.T, tmpl assertions.Template, typ string, n int) {
	t.Helper()
	assert(t, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(float64(n))) })
}
