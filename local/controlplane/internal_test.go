package controlplane

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readPEM(t *testing.T, path string) *pem.Block {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	return b
}

func TestWritePKI(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p, err := writePKI(t.TempDir(), now)
	if err != nil {
		t.Fatalf("writePKI() error = %v", err)
	}
	ca, err := x509.ParseCertificate(readPEM(t, p.CACert).Bytes)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := x509.ParseCertificate(readPEM(t, p.ServingCert).Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	t.Run("serving certificate is valid for every name clients use", func(t *testing.T) {
		for _, name := range []string{"127.0.0.1", "localhost", "kubernetes.default.svc", kubernetesSvcIP} {
			_, err := srv.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now})
			if err != nil {
				t.Errorf("Verify(%s) error = %v", name, err)
			}
		}
	})
	t.Run("serving certificate is not valid for other hosts", func(t *testing.T) {
		if _, err := srv.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots, CurrentTime: now}); err == nil {
			t.Error("Verify(example.com) succeeded")
		}
	})
	t.Run("service-account public key matches its private key", func(t *testing.T) {
		priv, err := x509.ParseECPrivateKey(readPEM(t, p.SAKey).Bytes)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := x509.ParsePKIXPublicKey(readPEM(t, p.SAPub).Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !priv.PublicKey.Equal(pub.(*ecdsa.PublicKey)) {
			t.Error("sa.pub is not the public half of sa.key")
		}
	})
	t.Run("keys are readable by the owner only", func(t *testing.T) {
		for _, f := range []string{p.CAKey, p.ServingKey, p.SAKey} {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s mode = %v, want 0600", filepath.Base(f), st.Mode().Perm())
			}
		}
	})
}

func TestTokenFile(t *testing.T) {
	tests := []struct {
		name string
		give []user
		want string
	}{
		{
			name: "user with groups has them quoted in the fourth column",
			give: []user{{Name: "admin", Groups: []string{"system:masters", "devs"}, Token: "t1"}},
			want: "t1,admin,admin,\"system:masters,devs\"\n",
		},
		{
			name: "user without groups has three columns",
			give: []user{{Name: "system:kube-scheduler", Token: "t2"}},
			want: "t2,system:kube-scheduler,system:kube-scheduler\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, string(tokenFile(tt.give))); diff != "" {
				t.Errorf("tokenFile() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewTokenIsRandomHex(t *testing.T) {
	a, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 64 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("newToken() = %q, want 64 hex digits", a)
	}
	if a == b {
		t.Error("two tokens are equal")
	}
}

func TestPrepareDir(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{name: "missing dir is created", setup: func(t *testing.T, dir string) {}},
		{name: "empty dir is used", setup: func(t *testing.T, dir string) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "dir left by a crashed run is emptied", setup: func(t *testing.T, dir string) {
			if err := prepareDir(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "etcd", "stale"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := appendPID(dir, Etcd, 999999999); err != nil { // no such process
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			tt.setup(t, dir)
			if err := prepareDir(dir); err != nil {
				t.Fatalf("prepareDir() error = %v", err)
			}
			var got []string
			err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
				rel, _ := filepath.Rel(dir, path)
				got = append(got, rel)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{".", markerFile, "etcd", "kubeconfigs", "logs", "pki"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("dir content mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareDirErrors(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr string
	}{
		{
			name: "non-empty dir without the marker is refused and left alone",
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "was not made by this package",
		},
		{
			name: "a file in place of the dir is refused",
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(dir, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "state dir",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			tt.setup(t, dir)
			err := prepareDir(dir)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("prepareDir() error = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("dir removed: %v", err)
			}
		})
	}
}

func TestStopDir(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := prepareDir(dir); err != nil {
		t.Fatal(err)
	}
	// A recorded process of this dir (its command line names dir), which
	// ignores SIGTERM so that SIGKILL is needed, and a recorded PID that now
	// belongs to an unrelated process.
	ours, err := startProcess(dir, "stubborn", "/bin/sh", []string{"-c", "trap '' TERM; while :; do sleep 1; done", dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	if err := appendPID(dir, "reused", other.Process.Pid); err != nil {
		t.Fatal(err)
	}

	if err := stopDir(dir, 100*time.Millisecond); err != nil {
		t.Fatalf("StopDir() error = %v", err)
	}
	select {
	case <-ours.done:
	case <-time.After(time.Second):
		t.Error("the recorded process of dir is still running")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the unrelated process was signalled: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir still there: %v", err)
	}
	if err := StopDir(dir); err != nil {
		t.Errorf("second StopDir() error = %v, want nil", err)
	}
}

func TestStopDirRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte("x 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := StopDir(dir); err == nil {
		t.Fatal("StopDir() error = nil, want a refusal")
	}
	if _, err := os.Stat(filepath.Join(dir, pidFile)); err != nil {
		t.Errorf("foreign dir changed: %v", err)
	}
}

func TestCheckBinaries(t *testing.T) {
	dir := t.TempDir()
	err := CheckBinaries(dir)
	if !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("CheckBinaries(empty) error = %v, want ErrNotBuilt", err)
	}
	for _, f := range []string{Etcd, APIServer, ControllerManager, Scheduler, Kwok, KwokStagesFile} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckBinaries(dir); err != nil {
		t.Errorf("CheckBinaries(full) error = %v", err)
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Errorf("freePorts() = %v: zero or repeated port", ports)
		}
		seen[p] = true
	}
}
