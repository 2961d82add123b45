package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nodewright/nodewright/infra/nodewright"
)

// Context keys the app reads (`cdk deploy -c key=value`, or cdk.json's
// "context"). Only clusterName is required.
const (
	ctxClusterName         = "clusterName"
	ctxClusterARN          = "clusterArn"
	ctxClusterEndpoint     = "clusterEndpoint"
	ctxClusterCAData       = "clusterCaData"
	ctxKubernetesVersion   = "kubernetesVersion"
	ctxServiceCIDR         = "serviceCidr"
	ctxClusterDNS          = "clusterDns"
	ctxClusterSG           = "clusterSecurityGroupId"
	ctxVPCID               = "vpcId"
	ctxSubnetIDs           = "subnetIds"
	ctxSecurityGroupIDs    = "securityGroupIds"
	ctxInterruption        = "interruption"
	ctxFeatureGates        = "featureGates"
	ctxLogRetentionDays    = "logRetentionDays"
	ctxLogLevel            = "logLevel"
	ctxNodeRoleName        = "nodeRoleName"
	ctxNodeRoles           = "nodeRoles"
	ctxWindowsNodeRoles    = "windowsNodeRoles"
	ctxNodeRolePathPrefix  = "nodeRolePathPrefix"
	ctxForwarderOIDC       = "forwarderOidcProviderArn"
	ctxReservedConcurrency = "reservedConcurrency"
	ctxAlarmTopicARN       = "alarmTopicArn"
	ctxIsolatedVPC         = "isolatedVPC"
	ctxDashboard           = "dashboard"
	ctxStackName           = "stackName"
)

// Defaults of the optional settings.
const (
	defaultLogRetentionDays = 30
	defaultLogLevel         = "info"
)

// config is everything the app needs, read once in main.
type config struct {
	stackName string
	// account and region of the stack; empty leaves the stack
	// environment-agnostic (synth without credentials).
	account, region string
	props           nodewright.Props
}

// lookup returns a context value: a string from `-c`, or any JSON value
// from cdk.json; nil when unset.
type lookup func(key string) any

// contextReader reads typed context values and collects every problem.
type contextReader struct {
	get  lookup
	errs []error
}

func (r *contextReader) str(key string) string {
	switch v := r.get(key).(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(v)
	default:
		return strings.TrimSpace(fmt.Sprint(v))
	}
}

func (r *contextReader) boolean(key string, def bool) bool {
	switch v := r.get(key).(type) {
	case nil:
		return def
	case bool:
		return v
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("context %s: %q is not true or false", key, v))
			return def
		}
		return b
	default:
		r.errs = append(r.errs, fmt.Errorf("context %s: %v is not true or false", key, v))
		return def
	}
}

func (r *contextReader) integer(key string, def int) int {
	switch v := r.get(key).(type) {
	case nil:
		return def
	case float64:
		if v == float64(int(v)) {
			return int(v)
		}
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err == nil {
			return n
		}
	}
	r.errs = append(r.errs, fmt.Errorf("context %s: %v is not an integer", key, r.get(key)))
	return def
}

// list reads a comma-separated string or a JSON array of strings.
func (r *contextReader) list(key string) []string {
	var items []string
	switch v := r.get(key).(type) {
	case nil:
		return nil
	case string:
		items = strings.Split(v, ",")
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				r.errs = append(r.errs, fmt.Errorf("context %s: %v is not a string", key, x))
				continue
			}
			items = append(items, s)
		}
	default:
		r.errs = append(r.errs, fmt.Errorf("context %s: %v is not a list", key, v))
	}
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// featureGates reads Karpenter's FEATURE_GATES syntax:
// "Name=true,Name=false" (the construct checks the names).
func (r *contextReader) featureGates(key string) map[string]bool {
	gates := map[string]bool{}
	for _, item := range r.list(key) {
		name, value, ok := strings.Cut(item, "=")
		b, err := strconv.ParseBool(strings.TrimSpace(value))
		if !ok || err != nil || strings.TrimSpace(name) == "" {
			r.errs = append(r.errs, fmt.Errorf("context %s: %q is not Name=true or Name=false", key, item))
			continue
		}
		gates[strings.TrimSpace(name)] = b
	}
	if len(gates) == 0 {
		return nil
	}
	return gates
}

// loadConfig reads the context through get and the environment through
// getenv (CDK_DEFAULT_ACCOUNT and CDK_DEFAULT_REGION, which the CDK CLI sets
// from the caller's credentials), and locates the repository from dir. It
// reports every problem at once.
func loadConfig(get lookup, getenv func(string) string, dir string) (config, error) {
	r := &contextReader{get: get}
	c := config{
		account: getenv("CDK_DEFAULT_ACCOUNT"),
		region:  getenv("CDK_DEFAULT_REGION"),
	}
	p := nodewright.Props{
		Cluster: nodewright.Cluster{
			Name:              r.str(ctxClusterName),
			Endpoint:          r.str(ctxClusterEndpoint),
			CAData:            r.str(ctxClusterCAData),
			KubernetesVersion: r.str(ctxKubernetesVersion),
			ServiceCIDR:       r.str(ctxServiceCIDR),
			DNS:               r.str(ctxClusterDNS),
			SecurityGroupID:   r.str(ctxClusterSG),
		},
		NodeRoleName:             r.str(ctxNodeRoleName),
		ForwarderOIDCProviderARN: r.str(ctxForwarderOIDC),
		Interruption:             r.boolean(ctxInterruption, true),
		FeatureGates:             r.featureGates(ctxFeatureGates),
		LogRetentionDays:         r.integer(ctxLogRetentionDays, defaultLogRetentionDays),
		LogLevel:                 defaultLogLevel,
		ReservedConcurrency:      r.boolean(ctxReservedConcurrency, true),
		AlarmTopicARN:            r.str(ctxAlarmTopicARN),
		IsolatedVPC:              r.boolean(ctxIsolatedVPC, false),
		Dashboard:                r.boolean(ctxDashboard, false),
	}
	if level := r.str(ctxLogLevel); level != "" {
		p.LogLevel = level
	}
	for _, arn := range r.list(ctxNodeRoles) {
		p.NodeRoles = append(p.NodeRoles, nodewright.NodeRole{ARN: arn})
	}
	for _, arn := range r.list(ctxWindowsNodeRoles) {
		p.NodeRoles = append(p.NodeRoles, nodewright.NodeRole{ARN: arn, Windows: true})
	}
	p.NodeRolePathPrefix = r.str(ctxNodeRolePathPrefix)
	if arn := r.str(ctxClusterARN); arn != "" {
		account, region, name, err := parseClusterARN(arn)
		switch {
		case err != nil:
			r.errs = append(r.errs, fmt.Errorf("context %s: %w", ctxClusterARN, err))
		case p.Cluster.Name != "" && name != p.Cluster.Name:
			r.errs = append(r.errs, fmt.Errorf("context %s: names cluster %q, not %q", ctxClusterARN, name, p.Cluster.Name))
		default:
			p.Cluster.Name = name
			c.account, c.region = account, region
		}
	}
	if p.Cluster.Name == "" {
		r.errs = append(r.errs, fmt.Errorf("context %s: required (cdk deploy -c %s=<EKS cluster name>)", ctxClusterName, ctxClusterName))
	}
	subnets, groups, vpc := r.list(ctxSubnetIDs), r.list(ctxSecurityGroupIDs), r.str(ctxVPCID)
	if len(subnets) > 0 || len(groups) > 0 || vpc != "" {
		p.Network = &nodewright.Network{SubnetIDs: subnets, SecurityGroupIDs: groups, VPCID: vpc}
	}
	c.stackName = r.str(ctxStackName)
	if c.stackName == "" {
		c.stackName = "nodewright-" + p.Cluster.Name
	}
	root, err := findRoot(dir)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	p.Assets = nodewright.Assets{
		DistDir:         filepath.Join(root, "dist"),
		StateMachineDir: filepath.Join(root, "statemachines"),
		TableSchema:     filepath.Join(root, "shared", "aws", "ddbstore", "schema.json"),
	}
	c.props = p
	return c, errors.Join(r.errs...)
}

// parseClusterARN splits arn:<partition>:eks:<region>:<account>:cluster/<name>.
func parseClusterARN(arn string) (account, region, name string, err error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "eks" || parts[3] == "" || parts[4] == "" ||
		!strings.HasPrefix(parts[5], "cluster/") || len(parts[5]) == len("cluster/") {
		return "", "", "", fmt.Errorf("%q is not an EKS cluster ARN (arn:aws:eks:<region>:<account>:cluster/<name>)", arn)
	}
	return parts[4], parts[3], strings.TrimPrefix(parts[5], "cluster/"), nil
}

// findRoot returns the repository root: the first of dir and its parents
// holding cdk.json (`cdk` runs the app from there or, through cdk.json's
// "app", from infra/).
func findRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "cdk.json")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("repository root: no cdk.json in %s or its parents", dir)
		}
		d = parent
	}
}
