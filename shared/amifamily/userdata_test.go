package amifamily_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// baseOptions are the inputs every golden file was derived from (see
// testdata/README.md).
func baseOptions() amifamily.Options {
	return amifamily.Options{
		ClusterName:     "test-cluster",
		ClusterEndpoint: "https://test-cluster",
		CABundle:        "Y2EtYnVuZGxlCg==",
		ClusterCIDR:     "10.100.0.0/16",
		ClusterDNS:      "10.0.100.10",
		MaxPods:         110,
		Labels: map[string]string{
			v1.LabelNodePool:       "default",
			v1.LabelEC2NodeClass:   "default",
			v1.LabelCapacityType:   "on-demand",
			"team":                 "a",
			v1.LabelTopologyRegion: "us-east-1",
			v1.LabelInstanceType:   "m5.large",
		},
		Taints: []corev1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute},
		},
	}
}

// kubeletOptions set every spec.kubelet field, RAID0, a kubelet clusterDNS
// and no labels or taints.
func kubeletOptions() amifamily.Options {
	o := baseOptions()
	o.Labels = nil
	o.Taints = nil
	o.MaxPods = 50
	o.InstanceStorePolicy = ptr("RAID0")
	o.Kubelet = &v1.KubeletConfiguration{
		ClusterDNS:                  []string{"10.0.200.10"},
		PodsPerCore:                 ptr(int32(4)),
		SystemReserved:              map[string]string{"cpu": "100m", "memory": "100Mi"},
		KubeReserved:                map[string]string{"cpu": "200m"},
		EvictionHard:                map[string]string{"memory.available": "5%"},
		EvictionSoft:                map[string]string{"memory.available": "10%"},
		EvictionSoftGracePeriod:     map[string]v1.Duration{"memory.available": {Raw: "1m"}},
		EvictionMaxPodGracePeriod:   ptr(int32(60)),
		ImageGCHighThresholdPercent: ptr(int32(85)),
		ImageGCLowThresholdPercent:  ptr(int32(80)),
		CPUCFSQuota:                 ptr(false),
	}
	return o
}

func withUserData(t *testing.T, o amifamily.Options, file string) amifamily.Options {
	t.Helper()
	o.UserData = ptr(readFile(t, file))
	return o
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUserData(t *testing.T) {
	tests := []struct {
		name   string
		family amifamily.Family
		opts   func(t *testing.T) amifamily.Options
		golden string
	}{
		{name: "AL2023 without user data is a MIME archive with one NodeConfig", family: amifamily.AL2023,
			opts: func(*testing.T) amifamily.Options { return baseOptions() }, golden: "al2023_unmerged.golden"},
		{name: "AL2023 wraps a shell script as text/x-shellscript before the NodeConfig", family: amifamily.AL2023,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "al2023_shell_input.txt") }, golden: "al2023_shell_merged.golden"},
		{name: "AL2023 passes a NodeConfig document as application/node.eks.aws", family: amifamily.AL2023,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "al2023_yaml_input.txt") }, golden: "al2023_yaml_merged.golden"},
		{name: "AL2023 keeps the parts of a MIME archive and strips carriage returns", family: amifamily.AL2023,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "al2023_mime_input.txt") }, golden: "al2023_mime_merged.golden"},
		{name: "AL2023 writes every kubelet setting and RAID0 local storage", family: amifamily.AL2023,
			opts: func(*testing.T) amifamily.Options { return kubeletOptions() }, golden: "al2023_kubelet.golden"},
		{name: "AL2 without user data calls bootstrap.sh", family: amifamily.AL2,
			opts: func(*testing.T) amifamily.Options { return baseOptions() }, golden: "al2_unmerged.golden"},
		{name: "AL2 runs the user's script before bootstrap.sh", family: amifamily.AL2,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "al2023_shell_input.txt") }, golden: "al2_shell_merged.golden"},
		{name: "AL2 keeps the parts of a MIME archive", family: amifamily.AL2,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "al2023_mime_input.txt") }, golden: "al2_mime_merged.golden"},
		{name: "AL2 passes every kubelet setting as extra args and RAID0 as local disks", family: amifamily.AL2,
			opts: func(*testing.T) amifamily.Options { return kubeletOptions() }, golden: "al2_kubelet.golden"},
		{name: "Bottlerocket without user data writes settings.kubernetes", family: amifamily.Bottlerocket,
			opts: func(*testing.T) amifamily.Options { return baseOptions() }, golden: "bottlerocket_unmerged.golden"},
		{name: "Bottlerocket overrides the user's cluster settings and merges labels and taints", family: amifamily.Bottlerocket,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "bottlerocket_input.toml") }, golden: "bottlerocket_merged.golden"},
		{name: "Bottlerocket writes every kubelet setting and the instance-storage bootstrap command", family: amifamily.Bottlerocket,
			opts: func(*testing.T) amifamily.Options { return kubeletOptions() }, golden: "bottlerocket_kubelet.golden"},
		{name: "Windows without user data calls Start-EKSBootstrap.ps1", family: amifamily.Windows2022,
			opts: func(*testing.T) amifamily.Options { return baseOptions() }, golden: "windows_unmerged.golden"},
		{name: "Windows runs the user's script inside the same powershell block", family: amifamily.Windows2019,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "windows_input.ps1") }, golden: "windows_merged.golden"},
		{name: "Custom passes the user data through verbatim", family: amifamily.Custom,
			opts: func(t *testing.T) amifamily.Options { return withUserData(t, baseOptions(), "custom_input.txt") }, golden: "custom_input.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.family.UserData(tt.opts(t))
			if err != nil {
				t.Fatalf("UserData() error = %v", err)
			}
			want := readFile(t, tt.golden)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("UserData() mismatch with testdata/%s (-want +got):\n%s", tt.golden, diff)
			}
		})
	}
}

// TestUserDataInvariants checks karpenter-spec §9.5's invariants on every
// non-Custom family, independently of the golden files.
func TestUserDataInvariants(t *testing.T) {
	for _, f := range []amifamily.Family{amifamily.AL2, amifamily.AL2023, amifamily.Bottlerocket, amifamily.Windows2019, amifamily.Windows2022, amifamily.Windows2025} {
		t.Run(string(f), func(t *testing.T) {
			got, err := f.UserData(baseOptions())
			if err != nil {
				t.Fatalf("UserData() error = %v", err)
			}
			for _, want := range []string{
				"karpenter.k8s.aws/ec2nodeclass", "karpenter.sh/capacity-type", "karpenter.sh/do-not-sync-taints",
				"karpenter.sh/nodepool", "karpenter.sh/unregistered", "110",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("user data lacks %q:\n%s", want, got)
				}
			}
			for _, unwanted := range []string{"\r", v1.LabelTopologyRegion, "m5.large"} {
				if strings.Contains(got, unwanted) {
					t.Errorf("user data contains %q:\n%s", unwanted, got)
				}
			}
			mime := strings.HasPrefix(got, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n")
			if wantMIME := f == amifamily.AL2 || f == amifamily.AL2023; mime != wantMIME {
				t.Errorf("MIME archive = %v, want %v", mime, wantMIME)
			}
		})
	}
}

func TestUserDataTaintsAreDeduplicated(t *testing.T) {
	o := baseOptions()
	o.Taints = []corev1.Taint{
		{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute},
		{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule},
		{Key: "a", Value: "2", Effect: corev1.TaintEffectNoSchedule},
	}
	got, err := amifamily.AL2.UserData(o)
	if err != nil {
		t.Fatalf("UserData() error = %v", err)
	}
	if want := "--register-with-taints=karpenter.sh/unregistered:NoExecute,a=1:NoSchedule --max-pods"; !strings.Contains(got, want) {
		t.Errorf("user data lacks %q:\n%s", want, got)
	}
}

func TestUserDataIPv6(t *testing.T) {
	o := baseOptions()
	o.ClusterDNS = "fd00:10::a"
	got, err := amifamily.AL2.UserData(o)
	if err != nil {
		t.Fatalf("UserData() error = %v", err)
	}
	if want := "--ip-family ipv6 \\\n--dns-cluster-ip 'fd00:10::a' \\\n"; !strings.Contains(got, want) {
		t.Errorf("user data lacks %q:\n%s", want, got)
	}
}

func TestUserDataCustomWithoutUserDataIsEmpty(t *testing.T) {
	got, err := amifamily.Custom.UserData(amifamily.Options{})
	if err != nil || got != "" {
		t.Errorf("UserData() = %q, %v; want empty, nil", got, err)
	}
}

func TestUserDataErrors(t *testing.T) {
	tests := []struct {
		name    string
		family  amifamily.Family
		mutate  func(*amifamily.Options)
		wantErr error
		wantMsg string
	}{
		{name: "AL2023 needs the service CIDR", family: amifamily.AL2023,
			mutate: func(o *amifamily.Options) { o.ClusterCIDR = "" }, wantMsg: "service CIDR"},
		{name: "every family but Custom needs the cluster name", family: amifamily.Bottlerocket,
			mutate: func(o *amifamily.Options) { o.ClusterName = "" }, wantMsg: "cluster name"},
		{name: "every family but Custom needs the endpoint", family: amifamily.AL2,
			mutate: func(o *amifamily.Options) { o.ClusterEndpoint = "" }, wantMsg: "endpoint"},
		{name: "every family but Custom needs the CA bundle", family: amifamily.Windows2022,
			mutate: func(o *amifamily.Options) { o.CABundle = "" }, wantMsg: "CA bundle"},
		{name: "max pods must be positive", family: amifamily.AL2023,
			mutate: func(o *amifamily.Options) { o.MaxPods = 0 }, wantMsg: "max pods"},
		{name: "Bottlerocket rejects user data that is not TOML", family: amifamily.Bottlerocket,
			mutate: func(o *amifamily.Options) { o.UserData = ptr("#!/bin/bash\necho hi\n") }, wantErr: amifamily.ErrInvalidUserData},
		{name: "Bottlerocket rejects settings.kubernetes that is not a table", family: amifamily.Bottlerocket,
			mutate: func(o *amifamily.Options) { o.UserData = ptr("[settings]\nkubernetes = 1\n") }, wantErr: amifamily.ErrInvalidUserData},
		{name: "AL2023 rejects a MIME archive without a boundary", family: amifamily.AL2023,
			mutate: func(o *amifamily.Options) {
				o.UserData = ptr("MIME-Version: 1.0\nContent-Type: multipart/mixed\n\n--x\n\necho\n--x--\n")
			}, wantErr: amifamily.ErrInvalidUserData},
		{name: "AL2 rejects a truncated MIME archive", family: amifamily.AL2,
			mutate: func(o *amifamily.Options) {
				o.UserData = ptr("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n--b\nContent-Type: text/x-shellscript\n\necho\n")
			}, wantErr: amifamily.ErrInvalidUserData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := baseOptions()
			tt.mutate(&o)
			_, err := tt.family.UserData(o)
			if err == nil {
				t.Fatal("UserData() error = nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("UserData() error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("UserData() error = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
