package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestUntolerated(t *testing.T) {
	batch := corev1.Taint{Key: "workload", Value: "batch", Effect: corev1.TaintEffectNoSchedule}
	soft := corev1.Taint{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}
	tests := []struct {
		name   string
		taints []corev1.Taint
		tols   []corev1.Toleration
		want   string // the untolerated taint's key, "" when all are tolerated
	}{
		{name: "should tolerate with an equal key, value and effect", taints: []corev1.Taint{batch},
			tols: []corev1.Toleration{{Key: "workload", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "should tolerate with Exists on the key", taints: []corev1.Taint{batch},
			tols: []corev1.Toleration{{Key: "workload", Operator: corev1.TolerationOpExists}}},
		{name: "should tolerate everything with an empty key and Exists", taints: []corev1.Taint{batch, soft},
			tols: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "should not tolerate a different value", taints: []corev1.Taint{batch},
			tols: []corev1.Toleration{{Key: "workload", Value: "web", Effect: corev1.TaintEffectNoSchedule}}, want: "workload"},
		{name: "should not tolerate a different effect", taints: []corev1.Taint{batch},
			tols: []corev1.Toleration{{Key: "workload", Value: "batch", Effect: corev1.TaintEffectNoExecute}}, want: "workload"},
		{name: "should treat PreferNoSchedule as a taint to tolerate", taints: []corev1.Taint{soft}, want: "soft"},
		{name: "should tolerate PreferNoSchedule with the relaxation toleration", taints: []corev1.Taint{soft},
			tols: []corev1.Toleration{preferNoScheduleToleration}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if taint := untolerated(tt.taints, tt.tols); taint != nil {
				got = taint.Key
			}
			if got != tt.want {
				t.Errorf("untolerated() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHostPortConflicts(t *testing.T) {
	tests := []struct {
		name string
		a, b hostPort
		want bool
	}{
		{name: "should conflict on the same port and protocol", a: hostPort{port: 80, protocol: "TCP"}, b: hostPort{port: 80, protocol: "TCP"}, want: true},
		{name: "should not conflict across protocols", a: hostPort{port: 53, protocol: "TCP"}, b: hostPort{port: 53, protocol: "UDP"}},
		{name: "should not conflict on different ports", a: hostPort{port: 80, protocol: "TCP"}, b: hostPort{port: 81, protocol: "TCP"}},
		{name: "should conflict when one address is the IPv4 wildcard", a: hostPort{ip: "0.0.0.0", port: 80, protocol: "TCP"}, b: hostPort{ip: "10.0.0.1", port: 80, protocol: "TCP"}, want: true},
		{name: "should conflict when one address is the IPv6 wildcard", a: hostPort{ip: "::", port: 80, protocol: "TCP"}, b: hostPort{ip: "10.0.0.1", port: 80, protocol: "TCP"}, want: true},
		{name: "should not conflict on two distinct specific addresses", a: hostPort{ip: "10.0.0.1", port: 80, protocol: "TCP"}, b: hostPort{ip: "10.0.0.2", port: 80, protocol: "TCP"}},
		{name: "should conflict on the same specific address", a: hostPort{ip: "10.0.0.1", port: 80, protocol: "TCP"}, b: hostPort{ip: "10.0.0.1", port: 80, protocol: "TCP"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.conflicts(tt.b); got != tt.want {
				t.Errorf("%s conflicts %s = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.conflicts(tt.a); got != tt.want {
				t.Errorf("%s conflicts %s = %v, want %v (symmetry)", tt.b, tt.a, got, tt.want)
			}
		})
	}
}

func TestPodHostPortsDefaultsToTCP(t *testing.T) {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{HostPort: 8080}, {ContainerPort: 9090}}}}}
	got := podHostPorts(&spec)
	if len(got) != 1 || got[0] != (hostPort{port: 8080, protocol: corev1.ProtocolTCP}) {
		t.Errorf("podHostPorts() = %v, want [0.0.0.0:8080/TCP]", got)
	}
}
