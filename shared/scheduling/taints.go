package scheduling

import (
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// tolerates reports whether toleration t tolerates taint (the
// Equal/Exists matching of k8s.io/api/core/v1 Toleration.ToleratesTaint):
// an empty effect matches every effect, an empty key with Exists matches
// every taint, Exists ignores the value and Equal (the default) compares it.
func tolerates(t *corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	default:
		return false
	}
}

// untolerated returns the first taint of taints (in order) that no
// toleration tolerates, or nil. Every effect counts, PreferNoSchedule
// included: Karpenter treats it as hard until the relaxation step that adds
// an Exists:PreferNoSchedule toleration (karpenter: scheduling.Taints
// ToleratesPod; karpenter-spec §2).
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration) *corev1.Taint {
	for i := range taints {
		ok := false
		for j := range tolerations {
			if tolerates(&tolerations[j], &taints[i]) {
				ok = true
				break
			}
		}
		if !ok {
			return &taints[i]
		}
	}
	return nil
}

// taintString renders a taint as key=value:Effect (key:Effect without a value).
func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

// ephemeralTaints are removed by controllers as a node comes up; an
// uninitialized managed node ignores them for placement (karpenter:
// pkg/controllers/state/statenode.go Taints; karpenter-spec §2).
var ephemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute},
}

// withoutTaints returns taints minus every taint matching one of drop by key
// and effect (the value is not compared, as Taint.MatchTaint).
func withoutTaints(taints []corev1.Taint, drop ...[]corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		skip := false
		for _, d := range drop {
			for i := range d {
				if d[i].Key == t.Key && d[i].Effect == t.Effect {
					skip = true
				}
			}
		}
		if !skip {
			out = append(out, t)
		}
	}
	return out
}

// hostPort is one host port a pod binds: IP (empty or unspecified means
// every address), port and protocol (karpenter: pkg/scheduling/hostportusage.go).
type hostPort struct {
	ip       string
	port     int32
	protocol corev1.Protocol
}

func (h hostPort) String() string {
	ip := h.ip
	if ip == "" {
		ip = "0.0.0.0"
	}
	return fmt.Sprintf("%s:%d/%s", ip, h.port, h.protocol)
}

func (h hostPort) unspecified() bool {
	if h.ip == "" {
		return true
	}
	ip := net.ParseIP(h.ip)
	return ip == nil || ip.IsUnspecified()
}

// conflicts reports whether two host ports cannot share a node: same port
// and protocol, and equal addresses or either one unspecified
// (0.0.0.0 or ::).
func (h hostPort) conflicts(o hostPort) bool {
	if h.port != o.port || h.protocol != o.protocol {
		return false
	}
	if h.unspecified() || o.unspecified() {
		return true
	}
	a, b := net.ParseIP(h.ip), net.ParseIP(o.ip)
	if a == nil || b == nil {
		return h.ip == o.ip
	}
	return a.Equal(b)
}

// podHostPorts lists the host ports of a pod's containers and restartable
// init containers (sidecars), sorted; protocol defaults to TCP.
func podHostPorts(spec *corev1.PodSpec) []hostPort {
	var out []hostPort
	collect := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			out = append(out, hostPort{ip: p.HostIP, port: p.HostPort, protocol: proto})
		}
	}
	for i := range spec.Containers {
		collect(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			collect(c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// portConflict returns the first port of want that conflicts with used, or nil.
func portConflict(used, want []hostPort) *hostPort {
	for i := range want {
		for j := range used {
			if want[i].conflicts(used[j]) {
				return &want[i]
			}
		}
	}
	return nil
}

// daemonPortConflict returns the first port of want that a DaemonSet
// running on every node of a pool binds, and that DaemonSet, or nil. A pod
// binding such a port can never run on a new node of the pool: its daemon
// pod holds the port from the start (karpenter: the daemonset host ports of
// a NodeClaim template, kubernetes-sigs/karpenter #2093).
func daemonPortConflict(daemons []*daemon, want []hostPort) (*hostPort, *daemon) {
	for _, d := range daemons {
		if hp := portConflict(d.ports, want); hp != nil {
			return hp, d
		}
	}
	return nil, nil
}
