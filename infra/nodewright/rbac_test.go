package nodewright

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestClusterRolesAllowTheCallsOfTheirFunction lists, per ClusterRole of
// infra/kube/rbac.yaml, Kubernetes calls its function makes through
// shared/kube, and fails when the role does not allow one: a missing rule
// only shows as a 403 in a live cluster.
func TestClusterRolesAllowTheCallsOfTheirFunction(t *testing.T) {
	tests := []struct {
		name     string
		role     string
		apiGroup string
		resource string
		verb     string
	}{
		{name: "disrupttask evicts pods", role: "nodewright:disrupttask", resource: "pods/eviction", verb: "create"},
		{name: "disrupttask lists the pods of a node", role: "nodewright:disrupttask", resource: "pods", verb: "list"},
		{name: "disrupttask lists VolumeAttachments to wait for their detachment", role: "nodewright:disrupttask", apiGroup: "storage.k8s.io", resource: "volumeattachments", verb: "list"},
		{name: "disrupttask reads the claims of pods it does not drain", role: "nodewright:disrupttask", resource: "persistentvolumeclaims", verb: "get"},
	}
	roles := map[string]k8sObject{}
	for _, o := range readObjects(t, filepath.Join("..", "kube", "rbac.yaml")) {
		if o.Kind == "ClusterRole" {
			roles[o.Metadata.Name] = o
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			role, ok := roles[tt.role]
			if !ok {
				t.Fatalf("no ClusterRole %s in infra/kube/rbac.yaml", tt.role)
			}
			allowed := false
			for _, r := range role.Rules {
				allowed = allowed || slices.Contains(r.APIGroups, tt.apiGroup) && slices.Contains(r.Resources, tt.resource) && slices.Contains(r.Verbs, tt.verb)
			}
			if !allowed {
				t.Errorf("ClusterRole %s does not allow %s on %q %s", tt.role, tt.verb, tt.apiGroup, tt.resource)
			}
		})
	}
}
