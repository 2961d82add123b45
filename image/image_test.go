package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var created = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fakeBinaries writes one small file per platform, each with different
// content, and returns them.
func fakeBinaries(t *testing.T, content string) []Binary {
	t.Helper()
	var out []Binary
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(t.TempDir(), arch)
		if err := os.WriteFile(p, []byte(content+arch), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, Binary{Platform: v1.Platform{OS: "linux", Architecture: arch}, Path: p})
	}
	return out
}

func build(t *testing.T, content string) v1.ImageIndex {
	t.Helper()
	idx, err := Build(BuildOptions{Binaries: fakeBinaries(t, content), Version: testVersion, Commit: strings.Repeat("ab", 20), Created: created})
	if err != nil {
		t.Fatalf("Build() error = %v", err)
	}
	return idx
}

// entries lists the flattened filesystem of img: name -> mode, uid, gid.
func entries(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = h.FileInfo().Mode().String() + " " + strconv.Itoa(h.Uid) + ":" + strconv.Itoa(h.Gid)
	}
}

// checkImage checks what every build of the image must hold, whatever the
// binaries are.
func checkImage(t *testing.T, idx v1.ImageIndex, wantVersion string) {
	t.Helper()
	if err := validate.Index(idx); err != nil {
		t.Fatalf("validate.Index() error = %v", err)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type = %s, want %s", mt, types.OCIImageIndex)
	}
	plats, err := platforms(idx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, plats); diff != "" {
		t.Errorf("platforms mismatch (-want +got):\n%s", diff)
	}
	for _, p := range plats {
		img, err := Platform(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != p {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		if diff := cmp.Diff([]string{Entrypoint}, cf.Config.Entrypoint); diff != "" {
			t.Errorf("%s: entrypoint mismatch (-want +got):\n%s", p, diff)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user = %q, want 65532:65532 (numeric, so runAsNonRoot can verify it)", p, cf.Config.User)
		}
		for _, k := range []string{LabelTitle, LabelVersion, LabelRevision, LabelCreated, LabelSource} {
			if cf.Config.Labels[k] == "" {
				t.Errorf("%s: label %s missing", p, k)
			}
		}
		if got := cf.Config.Labels[LabelVersion]; got != wantVersion {
			t.Errorf("%s: version label = %q, want %q", p, got, wantVersion)
		}
		if got := cf.Config.Labels[LabelRevision]; len(got) != 40 {
			t.Errorf("%s: revision label = %q, want a full commit hash", p, got)
		}
		files := entries(t, img)
		for path, want := range map[string]string{
			"usr/local/bin/nodewright-forwarder": "-r-xr-xr-x 0:0",
			"etc/ssl/certs/ca-certificates.crt":  "-rw-r--r-- 0:0",
			"etc/passwd":                         "-rw-r--r-- 0:0",
			"home/nonroot":                       "drwx------ 65532:65532",
		} {
			if got := files[path]; got != want {
				t.Errorf("%s: %s is %q, want %q", p, path, got, want)
			}
		}
		certs, err := ExtractFile(img, CABundle)
		if err != nil {
			t.Fatal(err)
		}
		checkCABundle(t, certs)
	}
}

// checkCABundle parses every PEM block and looks for the roots that AWS
// endpoints' chains end in.
func checkCABundle(t *testing.T, data []byte) {
	t.Helper()
	pool := x509.NewCertPool()
	n, subjects := 0, map[string]bool{}
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("CA bundle certificate %d: %v", n, err)
		}
		pool.AddCert(c)
		subjects[c.Subject.CommonName] = true
		n++
	}
	if n < 100 {
		t.Errorf("CA bundle holds %d certificates, want the NSS store (over 100)", n)
	}
	for _, cn := range []string{"Amazon Root CA 1", "Starfield Services Root Certificate Authority - G2"} {
		if !subjects[cn] {
			t.Errorf("CA bundle lacks %q", cn)
		}
	}
}

const testVersion = "v0.1.0-3-gabcdef0"

// roundTrip writes idx to an OCI layout and reads it back.
func roundTrip(t *testing.T, idx v1.ImageIndex) (string, v1.ImageIndex) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oci")
	if _, err := WriteLayout(dir, idx, testVersion); err != nil {
		t.Fatal(err)
	}
	got, _, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, got
}

func TestBuild(t *testing.T) {
	_, idx := roundTrip(t, build(t, "binary-"))
	checkImage(t, idx, testVersion)

	t.Run("should put each platform's own binary at the entrypoint", func(t *testing.T) {
		for _, arch := range []string{"amd64", "arm64"} {
			img, err := Platform(idx, "linux/"+arch)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ExtractFile(img, Entrypoint)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "binary-"+arch {
				t.Errorf("linux/%s entrypoint holds %q", arch, got)
			}
		}
	})
	t.Run("should give the same digest when rebuilt from the same inputs", func(t *testing.T) {
		a, _ := idx.Digest()
		b, _ := build(t, "binary-").Digest()
		if a != b {
			t.Errorf("rebuild digest %s != %s", b, a)
		}
	})
	t.Run("should round-trip through the OCI layout with its version name", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "oci")
		digest, err := WriteLayout(dir, idx, testVersion)
		if err != nil {
			t.Fatal(err)
		}
		got, version, err := ReadLayout(dir)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := got.Digest(); d != digest || version != testVersion {
			t.Errorf("ReadLayout() = %s %q, want %s %s", d, version, digest, testVersion)
		}
	})
}

func TestBuildErrors(t *testing.T) {
	bins := fakeBinaries(t, "x")
	tests := []struct {
		name string
		give BuildOptions
		want string
	}{
		{"no binaries", BuildOptions{Version: "v1", Commit: "c"}, "binaries"},
		{"no version", BuildOptions{Binaries: bins, Commit: "c"}, "version"},
		{"repeated platform", BuildOptions{Binaries: []Binary{bins[0], bins[0]}, Version: "v1", Commit: "c"}, "repeated"},
		{"missing binary", BuildOptions{Binaries: []Binary{{Platform: bins[0].Platform, Path: "/nonexistent"}}, Version: "v1", Commit: "c"}, "linux/amd64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Build(tt.give); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build() error = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

// TestPush pushes to go-containerregistry's in-memory registry, which (like
// Docker Hub, unlike ECR with IMMUTABLE tags) lets a tag move: Push must
// refuse to move it itself.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	repo := strings.TrimPrefix(srv.URL, "http://") + "/nodewright-forwarder"
	first, idx := roundTrip(t, build(t, "one-"))
	digest, _ := idx.Digest()
	ctx := context.Background()

	t.Run("should push every platform and return the reference pinned by digest", func(t *testing.T) {
		ref, err := Push(ctx, first, repo)
		if err != nil {
			t.Fatalf("Push() error = %v", err)
		}
		if want := repo + "@" + digest.String(); ref != want {
			t.Errorf("Push() = %s, want %s", ref, want)
		}
		tag, _ := name.NewTag(repo + ":" + testVersion)
		got, err := remote.Index(tag)
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := got.Digest(); d != digest {
			t.Errorf("registry's %s = %s, want %s", testVersion, d, digest)
		}
		checkImage(t, got, testVersion)
	})
	t.Run("should succeed without uploading when the tag already names this build", func(t *testing.T) {
		if _, err := Push(ctx, first, repo); err != nil {
			t.Errorf("second Push() error = %v", err)
		}
	})
	t.Run("should refuse to move a tag to another build", func(t *testing.T) {
		other, _ := roundTrip(t, build(t, "two-"))
		_, err := Push(ctx, other, repo)
		if err == nil || !strings.Contains(err.Error(), "immutable") {
			t.Fatalf("Push() error = %v, want the immutable-tag refusal", err)
		}
		tag, _ := name.NewTag(repo + ":" + testVersion)
		got, _ := remote.Head(tag)
		if got == nil || got.Digest != digest {
			t.Errorf("the tag moved to %v", got)
		}
	})
	t.Run("should name the problem with a repository that carries a tag", func(t *testing.T) {
		if _, err := Push(ctx, first, repo+":latest"); err == nil || !strings.Contains(err.Error(), "without a tag") {
			t.Errorf("Push() error = %v", err)
		}
	})
}

// TestBuiltImage opens the image `make image` wrote (dist/image/oci) and
// runs its linux/amd64 binary. make test runs make image first.
func TestBuiltImage(t *testing.T) {
	dir := filepath.Join("..", "dist", "image", "oci")
	if _, err := os.Stat(dir); err != nil {
		if testing.Short() {
			t.Skip("no dist/image/oci (make image): skipped under -short")
		}
		t.Fatalf("no image at %s: run make image first (%v)", dir, err)
	}
	idx, version, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkImage(t, idx, version)
	digest, _ := idx.Digest()
	if raw, err := os.ReadFile(filepath.Join("..", "dist", "image", "digest")); err != nil || strings.TrimSpace(string(raw)) != digest.String() {
		t.Errorf("dist/image/digest = %q (%v), want %s", raw, err, digest)
	}

	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("running the linux/amd64 binary needs a linux/amd64 host, this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	img, err := Platform(idx, "linux/amd64")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := ExtractFile(img, Entrypoint)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nodewright-forwarder")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "--help")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s --help: %v\n%s", Entrypoint, err, out.String())
	}
	cf, _ := img.ConfigFile()
	for _, want := range []string{"-cluster-name", version, cf.Config.Labels[LabelRevision]} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help output lacks %q (the binary's version must match the labels):\n%s", want, out.String())
		}
	}
}

// TestLogin stores a password the way docker login does and checks that
// go-containerregistry's default keychain, which push uses, finds it.
func TestLogin(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DOCKER_CONFIG", dir)
	const reg = "111122223333.dkr.ecr.us-east-1.amazonaws.com"
	if err := Login(dir, reg, "AWS", "token-1"); err != nil {
		t.Fatalf("Login() error = %v", err)
	}
	r, _ := name.NewRegistry(reg)
	auth, err := authn.DefaultKeychain.Resolve(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := auth.Authorization()
	if err != nil {
		t.Fatal(err)
	}
	if got.Username != "AWS" || got.Password != "token-1" {
		t.Errorf("keychain gives %q/%q, want AWS/token-1", got.Username, got.Password)
	}
	for _, bad := range []struct{ reg, pw string }{{reg, ""}, {reg + "/repo", "x"}} {
		if err := Login(dir, bad.reg, "AWS", bad.pw); err == nil {
			t.Errorf("Login(%q, %q) succeeded", bad.reg, bad.pw)
		}
	}
}
