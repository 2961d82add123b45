package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/manifest"
)

// validatePaths is the repeatable -f flag of validate.
type validatePaths []string

func (p *validatePaths) String() string { return strings.Join(*p, ",") }

// Set adds one path or a comma-separated list of paths, as plan's -f does.
func (p *validatePaths) Set(v string) error {
	n := len(*p)
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*p = append(*p, s)
		}
	}
	if len(*p) == n {
		return errors.New("empty path")
	}
	return nil
}

// Type is the value's name in pflag's help when the usage names none.
func (p *validatePaths) Type() string { return "paths" }

const validateUse = "validate -f FILE|DIR|-[,...] [-f ...] [-o table|json|yaml]"

const validateLong = `Reads Kubernetes manifests (YAML or JSON; directories recursively, "-" for
stdin), applies Karpenter's defaults to every NodePool, EC2NodeClass and
NodeClaim, and checks them against Karpenter v1.14.1's API rules. Prints one
line per problem and a summary (-o table, the default), or the same as one
object (-o json or yaml: findings, checked kinds, error and warning counts,
summary); other kinds are skipped.

Exit status: 0 when every object is valid (warnings allowed), 1 when any is
not, 2 for a usage error.`

// validateUsage follows a usage error of validate on stderr.
const validateUsage = "usage: nodewright " + validateUse + "\n"

func newValidateCommand(c cli) *cobra.Command {
	var paths validatePaths
	var output string
	cmd := &cobra.Command{
		Use:                   validateUse,
		Short:                 "validate NodePool and EC2NodeClass manifests",
		Long:                  validateLong,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			*c.code = runValidate(paths, output, args, c.stdin, c.stdout, c.stderr)
			return nil
		},
	}
	cmd.Flags().VarP(&paths, "filename", "f", "manifest `FILE|DIR|-` (repeatable or comma-separated; - reads stdin)")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	addOutputFlag(cmd, &output)
	return cmd
}

// runValidate implements "nodewright validate" for the parsed flags and
// positional args; it returns the exit code.
func runValidate(paths validatePaths, output string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0:
		fmt.Fprintf(stderr, "nodewright validate: unexpected argument %q (use -f)\n%s", args[0], validateUsage)
		return 2
	case len(paths) == 0:
		fmt.Fprintf(stderr, "nodewright validate: at least one -f is required\n%s", validateUsage)
		return 2
	case checkOutput(output) != nil:
		fmt.Fprintf(stderr, "nodewright validate: %v\n%s", checkOutput(output), validateUsage)
		return 2
	}
	objs, readErr := manifest.ReadPaths(paths, stdin)
	r := checkManifests(objs, readErr)
	out := validateOutput{Findings: r.findings, Checked: r.kinds, Errors: r.errors, Warnings: r.warnings, Summary: r.summary()}
	if out.Findings == nil {
		out.Findings = []string{}
	}
	if code := writeReport("validate", output, out, validateOutput.writeTable, stdout, stderr); code != 0 {
		return code
	}
	if r.errors > 0 {
		return 1
	}
	return 0
}

// validateOutput is what `nodewright validate` prints: the findings
// ("error: ..." and "warning: ..." lines, in input order), the objects
// checked per kind, the counts and the summary line.
type validateOutput struct {
	Findings []string       `json:"findings"`
	Checked  map[string]int `json:"checked"`
	Errors   int            `json:"errors"`
	Warnings int            `json:"warnings"`
	Summary  string         `json:"summary"`
}

func (o validateOutput) writeTable(w io.Writer) error {
	for _, f := range o.Findings {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, o.Summary)
	return err
}

// validateReport is the outcome of checking a set of manifests.
type validateReport struct {
	findings []string       // "error: ..." and "warning: ..." lines, in input order
	kinds    map[string]int // objects checked per kind
	errors   int
	warnings int
}

func (r *validateReport) add(severity, source, kind, name string, f v1.FieldError) {
	line := fmt.Sprintf("%s: %s: %s %q: %s", severity, source, kind, name, f.Error())
	if severity == "error" {
		r.errors++
	} else {
		r.warnings++
	}
	r.findings = append(r.findings, line)
}

func (r *validateReport) summary() string {
	var parts []string
	for _, k := range []struct{ kind, plural string }{
		{v1.KindNodePool, "NodePools"}, {v1.KindEC2NodeClass, "EC2NodeClasses"}, {v1.KindNodeClaim, "NodeClaims"},
	} {
		switch n := r.kinds[k.kind]; n {
		case 0:
		case 1:
			parts = append(parts, "1 "+k.kind)
		default:
			parts = append(parts, fmt.Sprintf("%d %s", n, k.plural))
		}
	}
	checked := "no NodePool, EC2NodeClass or NodeClaim found"
	if len(parts) > 0 {
		checked = "checked " + strings.Join(parts, ", ")
	}
	verdict := "valid"
	if r.errors > 0 {
		verdict = "invalid"
	}
	return fmt.Sprintf("%s: %s; %d %s, %d %s", verdict, checked, r.errors, plural(r.errors, "error"), r.warnings, plural(r.warnings, "warning"))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// karpenterObject is what the three Karpenter kinds share.
type karpenterObject interface {
	SetDefaults()
	Validate() error
	Warnings() []v1.FieldError
}

// checkManifests defaults and validates every Karpenter object read, and
// cross-references NodePools with the EC2NodeClasses of the same input (a
// missing class is a warning: it may already be in the cluster).
func checkManifests(objs []manifest.Object, readErr error) validateReport {
	r := validateReport{kinds: map[string]int{}}
	classes := map[string]bool{}
	var partials []manifest.Object
	for _, err := range unjoin(readErr) {
		r.errors++
		r.findings = append(r.findings, "error: "+err.Error())
		var de *manifest.DocumentError
		if !errors.As(err, &de) {
			continue
		}
		if de.Kind == v1.KindEC2NodeClass && de.Name != "" {
			// The class is in the input, only broken: its NodePools
			// must not be told it is missing.
			classes[de.Name] = true
		}
		if de.Partial != nil {
			// Check the rest of an object whose bad values were
			// reported above, so one bad field hides nothing else.
			partials = append(partials, *de.Partial)
		}
	}
	if len(objs) == 0 && readErr == nil {
		r.warnings++
		r.findings = append(r.findings, "warning: no manifests found (the input is empty or holds only separators and comments)")
	}
	objs = append(slices.Clip(objs), partials...)
	for _, o := range objs {
		if o.Kind == v1.KindEC2NodeClass && o.Typed != nil {
			classes[o.Name] = true
		}
	}
	seen := map[string]string{}
	for _, o := range objs {
		if o.Typed != nil {
			// Two objects of one kind and namespace/name would overwrite
			// each other when applied; plan rejects them too. A directory is
			// one cluster's manifests, so the same name in two directories
			// (two clusters, as in the seed examples) is not a duplicate.
			id := sourceDir(o.Source) + "|" + o.Kind + " " + o.Namespace + "/" + o.Name
			if prev, dup := seen[id]; dup {
				name := o.Name
				if o.Namespace != "" {
					name = o.Namespace + "/" + o.Name
				}
				r.errors++
				r.findings = append(r.findings, fmt.Sprintf("error: %s: %s %q: duplicate of %s", o.Source, o.Kind, name, prev))
			} else {
				seen[id] = o.Source
			}
		}
		for _, w := range o.Warnings {
			if manifest.Strict(w) {
				r.add("error", o.Source, o.Kind, o.Name, strictError(w))
				continue
			}
			r.add("warning", o.Source, o.Kind, o.Name, w)
		}
		obj, ok := o.Typed.(karpenterObject)
		if !ok {
			continue
		}
		r.kinds[o.Kind]++
		obj.SetDefaults()
		var ve *v1.ValidationError
		if err := obj.Validate(); errors.As(err, &ve) {
			for _, f := range ve.Fields {
				r.add("error", o.Source, o.Kind, o.Name, f)
			}
		} else if err != nil {
			r.add("error", o.Source, o.Kind, o.Name, v1.FieldError{Path: "", Message: err.Error()})
		}
		for _, w := range obj.Warnings() {
			r.add("warning", o.Source, o.Kind, o.Name, w)
		}
		if np, ok := obj.(*v1.NodePool); ok {
			ref := np.Spec.Template.Spec.NodeClassRef
			if ref != nil && ref.Group == v1.AWSGroup && ref.Kind == v1.KindEC2NodeClass && ref.Name != "" && !classes[ref.Name] {
				r.add("warning", o.Source, o.Kind, o.Name, v1.FieldError{
					Path:    "spec.template.spec.nodeClassRef.name",
					Message: fmt.Sprintf("EC2NodeClass %q is not in the input (fine if it already exists in the cluster)", ref.Name),
				})
			}
		}
	}
	return r
}

// strictError turns a decode warning that kubectl apply would reject
// (manifest.Strict) into the error the CLI reports: a typo such as
// consolidateAftr must not pass as valid while Karpenter silently keeps
// the default.
func strictError(w v1.FieldError) v1.FieldError {
	if msg, ok := strings.CutSuffix(w.Message, "; "+manifest.MessageUnsupportedVersion); ok {
		return v1.FieldError{Path: w.Path, Message: msg + "; Karpenter v1.14.1's CRDs do not serve it (kubectl apply fails with no matches for kind)"}
	}
	return v1.FieldError{Path: w.Path, Message: strings.TrimSuffix(w.Message, "; ignored") + "; kubectl apply rejects it (strict field validation)"}
}

// strictErrors lists, as one error, the decode warnings of objs that
// kubectl apply would reject; nil when there are none.
func strictErrors(objs []manifest.Object) error {
	var errs []error
	for _, o := range objs {
		for _, w := range o.Warnings {
			if manifest.Strict(w) {
				errs = append(errs, fmt.Errorf("%s: %s %q: %s", o.Source, o.Kind, o.Name, strictError(w).Error()))
			}
		}
	}
	return errors.Join(errs...)
}

// unjoin flattens errors.Join trees into their leaves.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// sourceDir is the directory of a manifest source ("path#doc"), or the
// source itself for stdin.
func sourceDir(source string) string {
	path, _, _ := strings.Cut(source, "#")
	if path == "stdin" || path == "-" {
		return path
	}
	return filepath.Dir(path)
}
