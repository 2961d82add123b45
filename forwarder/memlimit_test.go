package main

import (
	"io/fs"
	"strings"
	"testing"
)

func TestGoMemoryLimit(t *testing.T) {
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if v, ok := m[path]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	noEnv := func(string) string { return "" }
	tests := []struct {
		name     string
		getenv   func(string) string
		files    map[string]string
		want     int64
		wantFrom string
		wantErr  string
	}{
		{name: "should set 90% of the cgroup v2 limit", getenv: noEnv,
			files: map[string]string{cgroupV2MemoryMax: "536870912\n"}, want: 483183820, wantFrom: cgroupV2MemoryMax},
		{name: "should set the cgroup v1 limit less 32 MiB without v2 (less than 90% of 256 MiB)", getenv: noEnv,
			files: map[string]string{cgroupV1MemoryMax: "268435456\n"}, want: 234881024, wantFrom: cgroupV1MemoryMax},
		{name: "should set none when cgroup v2 has no limit", getenv: noEnv,
			files: map[string]string{cgroupV2MemoryMax: "max\n", cgroupV1MemoryMax: "268435456"}},
		{name: "should set none when cgroup v1 has no limit", getenv: noEnv,
			files: map[string]string{cgroupV1MemoryMax: "9223372036854771712\n"}},
		{name: "should set none outside a cgroup", getenv: noEnv},
		{name: "should leave GOMEMLIMIT to the runtime", getenv: func(k string) string {
			if k == "GOMEMLIMIT" {
				return "200MiB"
			}
			return ""
		}, files: map[string]string{cgroupV2MemoryMax: "536870912"}},
		{name: "should set 90% of the memory request, before the cgroup limit", getenv: func(k string) string {
			if k == memoryRequestEnv {
				return "536870912"
			}
			return ""
		}, files: map[string]string{cgroupV2MemoryMax: "2147483648"}, want: 483183820, wantFrom: memoryRequestEnv},
		{name: "should leave 32 MiB beside the limit of a 256Mi request (Fargate's smallest size)", getenv: func(k string) string {
			if k == memoryRequestEnv {
				return "268435456"
			}
			return ""
		}, want: 234881024, wantFrom: memoryRequestEnv},
		{name: "should set 90% of a request too small for 32 MiB of room", getenv: func(k string) string {
			if k == memoryRequestEnv {
				return "62914560"
			}
			return ""
		}, want: 56623104, wantFrom: memoryRequestEnv},
		{name: "should name a request that does not parse", getenv: func(k string) string {
			if k == memoryRequestEnv {
				return "512Mi"
			}
			return ""
		}, wantErr: memoryRequestEnv},
		{name: "should name the file that does not parse", getenv: noEnv,
			files: map[string]string{cgroupV2MemoryMax: "lots"}, wantErr: cgroupV2MemoryMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, from, err := goMemoryLimit(tt.getenv, files(tt.files))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("goMemoryLimit() error = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("goMemoryLimit() error = %v", err)
			}
			if got != tt.want || from != tt.wantFrom {
				t.Errorf("goMemoryLimit() = %d from %q, want %d from %q", got, from, tt.want, tt.wantFrom)
			}
		})
	}
}
