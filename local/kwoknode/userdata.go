// Package kwoknode turns instances the EC2 simulator (local/ec2sim) has
// booted into Nodes that kwok manages, the way a kubelet and the AWS cloud
// controller would register them on a real instance: named after the
// instance's private DNS name, with providerID aws:///<zone>/<instance-id>,
// the labels, taints and max pods the launch's user data asks for, the
// well-known labels the kubelet and the cloud controller set (hostname, os,
// arch, instance type, zone, region), and capacity/allocatable of the
// instance type from the embedded catalog (shared/catalog). A Node whose
// instance is terminated (or no longer described) is deleted.
//
// The kubelet's own side of registration (the Ready condition, heartbeats,
// running pods) is kwok's: every Node created here carries the annotation
// kwok.x-k8s.io/node=fake (local/controlplane.ManagedNodeAnnotation).
package kwoknode

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Launch is what a node's kubelet is told by its user data: the
// --node-labels, --register-with-taints and maxPods (--max-pods) it
// registers with.
type Launch struct {
	Labels  map[string]string
	Taints  []corev1.Taint
	MaxPods int32 // 0 when the user data does not say
}

// ParseUserData reads back the kubelet settings of user data written by
// shared/amifamily: AL2023 nodeadm NodeConfig documents (YAML, possibly in
// a MIME multipart archive: spec.kubelet.config.maxPods and
// registerWithTaints, spec.kubelet.flags), AL2 and Windows bootstrap
// command lines (--node-labels=, --register-with-taints=, --max-pods=
// anywhere in the text) and Bottlerocket TOML
// ([settings.kubernetes.node-labels], [settings.kubernetes.node-taints],
// settings.kubernetes.max-pods). Later documents win. Errors name the
// setting that does not parse.
func ParseUserData(data []byte) (Launch, error) {
	l := Launch{Labels: map[string]string{}}
	text := string(data)
	for _, doc := range nodeConfigs(text) {
		if err := l.mergeNodeConfig(doc); err != nil {
			return Launch{}, err
		}
	}
	if err := l.mergeFlags(text); err != nil {
		return Launch{}, err
	}
	if err := l.mergeBottlerocket(text); err != nil {
		return Launch{}, err
	}
	return l, nil
}

// nodeConfigs returns the YAML documents of text that are nodeadm
// NodeConfigs (kind: NodeConfig), MIME boundaries and headers removed.
func nodeConfigs(text string) []string {
	var docs []string
	var cur []string
	flush := func() {
		doc := strings.Join(cur, "\n")
		if strings.Contains(doc, "kind: NodeConfig") {
			docs = append(docs, doc)
		}
		cur = nil
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "--"), strings.TrimSpace(line) == "---":
			flush()
		case strings.HasPrefix(line, "Content-Type:"), strings.HasPrefix(line, "MIME-Version:"):
		default:
			cur = append(cur, line)
		}
	}
	flush()
	return docs
}

type nodeConfig struct {
	Spec struct {
		Kubelet struct {
			Config struct {
				MaxPods            *int32         `json:"maxPods"`
				RegisterWithTaints []corev1.Taint `json:"registerWithTaints"`
			} `json:"config"`
			Flags []string `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

func (l *Launch) mergeNodeConfig(doc string) error {
	var nc nodeConfig
	if err := yaml.Unmarshal([]byte(doc), &nc); err != nil {
		return fmt.Errorf("nodeadm node config: %w", err)
	}
	k := nc.Spec.Kubelet
	if k.Config.MaxPods != nil {
		l.MaxPods = *k.Config.MaxPods
	}
	l.Taints = append(l.Taints, k.Config.RegisterWithTaints...)
	return l.mergeFlags(strings.Join(k.Flags, " "))
}

// mergeFlags applies every --node-labels=, --register-with-taints= and
// --max-pods= in text (kubelet flag syntax, values possibly quoted).
func (l *Launch) mergeFlags(text string) error {
	for _, field := range strings.Fields(text) {
		field = strings.Trim(field, `'"`)
		name, value, ok := strings.Cut(field, "=")
		if !ok {
			continue
		}
		value = strings.Trim(value, `'"`)
		switch name {
		case "--node-labels":
			for _, kv := range strings.Split(value, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--node-labels %q: want key=value pairs", value)
				}
				l.Labels[k] = v
			}
		case "--register-with-taints":
			for _, s := range strings.Split(value, ",") {
				t, err := parseTaint(s)
				if err != nil {
					return fmt.Errorf("--register-with-taints: %w", err)
				}
				l.addTaint(t)
			}
		case "--max-pods":
			n, err := strconv.ParseInt(value, 10, 32)
			if err != nil {
				return fmt.Errorf("--max-pods %q: %w", value, err)
			}
			l.MaxPods = int32(n)
		}
	}
	return nil
}

// parseTaint reads key[=value]:Effect.
func parseTaint(s string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || effect == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:effect", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, nil
}

func (l *Launch) addTaint(t corev1.Taint) {
	for _, have := range l.Taints {
		if have.Key == t.Key && have.Effect == t.Effect {
			return
		}
	}
	l.Taints = append(l.Taints, t)
}

// mergeBottlerocket reads the node labels, taints and max pods of
// Bottlerocket TOML settings: tables [settings.kubernetes.node-labels]
// (key = "value") and [settings.kubernetes.node-taints] (key =
// ["value:Effect"]) and the key max-pods under [settings.kubernetes].
func (l *Launch) mergeBottlerocket(text string) error {
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k = strings.Trim(strings.TrimSpace(k), `"`)
		v = strings.TrimSpace(v)
		switch section {
		case "settings.kubernetes.node-labels":
			l.Labels[k] = strings.Trim(v, `"`)
		case "settings.kubernetes.node-taints":
			for _, item := range strings.Split(strings.Trim(v, "[]"), ",") {
				item = strings.Trim(strings.TrimSpace(item), `"`)
				if item == "" {
					continue
				}
				t, err := parseTaint(k + "=" + item)
				if err != nil {
					return fmt.Errorf("bottlerocket node-taints: %w", err)
				}
				l.addTaint(t)
			}
		case "settings.kubernetes":
			if k == "max-pods" {
				n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 32)
				if err != nil {
					return fmt.Errorf("bottlerocket max-pods %q: %w", v, err)
				}
				l.MaxPods = int32(n)
			}
		}
	}
	return nil
}
