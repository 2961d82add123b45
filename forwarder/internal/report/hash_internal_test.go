package report

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// TestEncodePodsSizesAreTheFullEncodings: the parts are sized from the pods'
// decision encodings; each size must be the pod's whole encoding (and its
// comma), or a part could pass v1.MaxMessageBytes.
func TestEncodePodsSizesAreTheFullEncodings(t *testing.T) {
	at := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	pods := []v1.PodSummary{
		{Name: "web-0", Namespace: "shop", UID: "uid-web-0", CreationTimestamp: at, NodeName: "n1"},
		{Name: `odd"name\`, Namespace: "shop", UID: "u", NodeName: "n1"}, // escaped, and no creation time
		{Name: "db-0", Namespace: "shop", UID: "uid-db-0", CreationTimestamp: at, Annotations: map[string]string{v1.AnnotationDoNotDisrupt: "true"}},
	}
	sizes, err := encodePods(newSnapshotHashes(), pods)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pods {
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if sizes[i] != len(data)+1 {
			t.Errorf("pod %s: size %d, want %d (its encoding and a comma)", p.Name, sizes[i], len(data)+1)
		}
	}
}
