package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/shared/manifest"
)

func readManifests(t *testing.T, yaml string) []manifest.Object {
	t.Helper()
	objs, err := manifest.ReadPaths([]string{"-"}, strings.NewReader(yaml))
	if err != nil {
		t.Fatalf("ReadPaths() error = %v", err)
	}
	return objs
}

const (
	poolInTokyo = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: tokyo}\nspec:\n  template:\n    spec:\n" +
		"      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n" +
		"      requirements:\n        - {key: topology.kubernetes.io/zone, operator: In, values: [ap-northeast-1a, ap-northeast-1c]}\n"
	nodeInIreland = "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n  labels: {topology.kubernetes.io/zone: eu-west-1b}\n"
	nodeInOhio    = "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-b\n  labels: {topology.kubernetes.io/region: us-east-2}\n"
)

func TestInferRegion(t *testing.T) {
	tests := []struct {
		name, input, want, wantFrom string
	}{
		{"should read a NodePool's zone requirement", poolInTokyo, "ap-northeast-1", "NodePool tokyo requirement topology.kubernetes.io/zone"},
		{"should read a Node's zone label", nodeInIreland, "eu-west-1", "Node node-a label topology.kubernetes.io/zone"},
		{"should prefer a Node's region label", nodeInOhio, "us-east-2", "Node node-b label topology.kubernetes.io/region"},
		{"should read a Local Zone", strings.Replace(nodeInIreland, "eu-west-1b", "us-east-1-bos-1a", 1), "us-east-1", "Node node-a label topology.kubernetes.io/zone"},
		{"should name none when the input has no zones", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, from, err := inferRegion(readManifests(t, tt.input))
			if err != nil || got != tt.want || from != tt.wantFrom {
				t.Errorf("inferRegion() = %q, %q, %v; want %q, %q, nil", got, from, err, tt.want, tt.wantFrom)
			}
		})
	}
}

func TestInferRegionRejectsMixedRegions(t *testing.T) {
	_, _, err := inferRegion(readManifests(t, poolInTokyo+"---\n"+nodeInIreland))
	if err == nil || !strings.Contains(err.Error(), "ap-northeast-1 (NodePool tokyo") || !strings.Contains(err.Error(), "eu-west-1 (Node node-a") || !strings.Contains(err.Error(), "set --region") {
		t.Errorf("inferRegion() error = %v, want both regions with their sources and a hint to set --region", err)
	}
}

func TestChooseRegion(t *testing.T) {
	tests := []struct {
		name, flag, input, want, wantNote string
	}{
		{"should keep --region over the input", "eu-central-1", poolInTokyo, "eu-central-1", ""},
		{"should take the input's region and say so", "", poolInTokyo, "ap-northeast-1", "note: no --region; using ap-northeast-1, from NodePool tokyo"},
		{"should fall back to us-east-1 and say so", "", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "us-east-1", "note: no --region and the input names none; using us-east-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got, err := chooseRegion(tt.flag, readManifests(t, tt.input), &stderr)
			if err != nil || got != tt.want {
				t.Errorf("chooseRegion() = %q, %v; want %q", got, err, tt.want)
			}
			if !strings.HasPrefix(stderr.String(), tt.wantNote) || (tt.wantNote == "") != (stderr.Len() == 0) {
				t.Errorf("chooseRegion() stderr = %q, want it to start with %q", stderr.String(), tt.wantNote)
			}
		})
	}
}
