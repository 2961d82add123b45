package stack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestOptionsFillAppliesDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Options
		want Options
	}{
		{
			name: "should default the cluster, region, version, boot delay and gc interval",
			in:   Options{Dir: "/tmp/s", BinDir: "/b", ForwarderBin: "/f"},
			want: Options{Dir: "/tmp/s", BinDir: "/b", ForwarderBin: "/f", ClusterName: DefaultClusterName, Region: DefaultRegion,
				KubernetesVersion: DefaultKubernetesVersion, BootDelay: DefaultBootDelay, GCInterval: DefaultGCInterval},
		},
		{
			name: "should keep a negative boot delay as no delay",
			in:   Options{Dir: "/tmp/s", BinDir: "/b", ForwarderBin: "/f", BootDelay: -1, Region: "us-east-1", GCInterval: time.Second},
			want: Options{Dir: "/tmp/s", BinDir: "/b", ForwarderBin: "/f", ClusterName: DefaultClusterName, Region: "us-east-1",
				KubernetesVersion: DefaultKubernetesVersion, BootDelay: 0, GCInterval: time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			if err := got.fill(); err != nil {
				t.Fatalf("fill() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Options{}, "RepoRoot")); diff != "" {
				t.Errorf("fill() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "should require a state dir", opts: Options{}, wantErr: "Dir is required"},
		{name: "should name missing control-plane binaries", opts: Options{Dir: "DIR", BinDir: "EMPTY", ForwarderBin: "/bin/true"}, wantErr: "make controlplane"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			opts := tt.opts
			opts.Dir = strings.ReplaceAll(opts.Dir, "DIR", filepath.Join(tmp, "stack"))
			opts.BinDir = strings.ReplaceAll(opts.BinDir, "EMPTY", tmp)
			s, err := Up(context.Background(), opts)
			if err == nil {
				_ = s.Down()
				t.Fatal("Up() error = nil, want one")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Up() error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestDownDir(t *testing.T) {
	t.Run("should accept a missing dir", func(t *testing.T) {
		if err := DownDir(filepath.Join(t.TempDir(), "nothing")); err != nil {
			t.Errorf("DownDir() error = %v, want nil", err)
		}
	})
	t.Run("should refuse a dir that is not a stack and leave it", func(t *testing.T) {
		dir := t.TempDir()
		keep := filepath.Join(dir, "precious.txt")
		if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := DownDir(dir); err == nil {
			t.Error("DownDir() error = nil, want a refusal")
		}
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("DownDir() removed a directory that is not a stack: %v", err)
		}
	})
	t.Run("should remove a stack dir whose processes are gone", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "stack")
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
			t.Fatal(err)
		}
		// PIDs that cannot be running processes of this dir.
		if err := writeInfo(dir, Info{Dir: dir, ServePID: 1 << 30, PIDs: map[string]int{"forwarder": 1<<30 + 1}}); err != nil {
			t.Fatal(err)
		}
		if err := DownDir(dir); err != nil {
			t.Fatalf("DownDir() error = %v", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("state dir still there (stat error %v)", err)
		}
	})
}
