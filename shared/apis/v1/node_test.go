package v1_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func TestParseProviderID(t *testing.T) {
	tests := []struct {
		providerID string
		wantZone   string
		wantID     string
	}{
		{providerID: "aws:///us-east-1a/i-0123456789abcdef0", wantZone: "us-east-1a", wantID: "i-0123456789abcdef0"},
		{providerID: "aws:///eu-west-3c/i-1", wantZone: "eu-west-3c", wantID: "i-1"},
	}
	for _, tt := range tests {
		t.Run("should parse "+tt.providerID, func(t *testing.T) {
			zone, id, err := v1.ParseProviderID(tt.providerID)
			if err != nil {
				t.Fatalf("ParseProviderID() error = %v", err)
			}
			if zone != tt.wantZone || id != tt.wantID {
				t.Errorf("ParseProviderID() = %q, %q, want %q, %q", zone, id, tt.wantZone, tt.wantID)
			}
			if got := v1.ProviderID(zone, id); got != tt.providerID {
				t.Errorf("ProviderID(%q, %q) = %q, want %q", zone, id, got, tt.providerID)
			}
		})
	}
}

func TestParseProviderIDErrors(t *testing.T) {
	for _, pid := range []string{
		"", "i-0123", "aws://us-east-1a/i-0123", "aws:///i-0123", "aws:///us-east-1a/", "aws:///us-east-1a/vol-1",
		"aws:///us-east-1a/x-1", "aws:///us-east-1a/i-1/x", "aws:///us-east-1a/i-1#x", "gce:///z/i-1", "kwok://node",
	} {
		t.Run(fmt.Sprintf("should refuse %q", pid), func(t *testing.T) {
			if _, _, err := v1.ParseProviderID(pid); !errors.Is(err, v1.ErrInvalidProviderID) {
				t.Errorf("ParseProviderID(%q) error = %v, want ErrInvalidProviderID", pid, err)
			}
		})
	}
}

func TestNodeReady(t *testing.T) {
	cond := func(s corev1.ConditionStatus) []corev1.NodeCondition {
		return []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}, {Type: corev1.NodeReady, Status: s}}
	}
	tests := []struct {
		name  string
		conds []corev1.NodeCondition
		want  bool
	}{
		{name: "should be ready when Ready is True", conds: cond(corev1.ConditionTrue), want: true},
		{name: "should not be ready when Ready is False", conds: cond(corev1.ConditionFalse)},
		{name: "should not be ready when Ready is Unknown", conds: cond(corev1.ConditionUnknown)},
		{name: "should not be ready without a Ready condition", conds: cond(corev1.ConditionTrue)[:1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &corev1.Node{Status: corev1.NodeStatus{Conditions: tt.conds}}
			if got := v1.NodeReady(n); got != tt.want {
				t.Errorf("NodeReady() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDisruptedTaintRules(t *testing.T) {
	tolerations := []struct {
		name string
		tol  corev1.Toleration
		want bool
	}{
		{"should tolerate Exists on its key", corev1.Toleration{Key: v1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists}, true},
		{"should tolerate Exists with an empty key (every taint)", corev1.Toleration{Operator: corev1.TolerationOpExists}, true},
		{"should tolerate Equal on its key with the empty value", corev1.Toleration{Key: v1.TaintKeyDisrupted, Operator: corev1.TolerationOpEqual}, true},
		{"should tolerate the default operator (Equal) with its effect", corev1.Toleration{Key: v1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}, true},
		{"should not tolerate Equal with another value", corev1.Toleration{Key: v1.TaintKeyDisrupted, Value: "x"}, false},
		{"should not tolerate another effect", corev1.Toleration{Key: v1.TaintKeyDisrupted, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, false},
		{"should not tolerate another key", corev1.Toleration{Key: v1.TaintKeyUnregistered, Operator: corev1.TolerationOpExists}, false},
	}
	for _, tt := range tolerations {
		t.Run(tt.name, func(t *testing.T) {
			if got := v1.ToleratesDisruptedTaint(tt.tol); got != tt.want {
				t.Errorf("ToleratesDisruptedTaint(%+v) = %v, want %v", tt.tol, got, tt.want)
			}
		})
	}
	n := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: v1.TaintKeyDisrupted, Effect: corev1.TaintEffectNoExecute}}}}
	if v1.HasDisruptedTaint(n) {
		t.Error("HasDisruptedTaint with the key under NoExecute = true, want false (Karpenter's taint is NoSchedule)")
	}
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1.TaintKeyDisrupted, Value: "v", Effect: corev1.TaintEffectNoSchedule})
	if !v1.HasDisruptedTaint(n) {
		t.Error("HasDisruptedTaint with karpenter.sh/disrupted:NoSchedule = false, want true")
	}
}
