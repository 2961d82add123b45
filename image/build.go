package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// What the image holds and how it runs. The uid and gid are those of
// distroless's "nonroot" user, which Kubernetes' runAsNonRoot accepts
// because the image names a numeric user.
const (
	Entrypoint = "/usr/local/bin/nodewright-forwarder"
	CABundle   = "/etc/ssl/certs/ca-certificates.crt" // the first path Go's crypto/x509 reads on Linux
	User       = "65532:65532"
	nonrootUID = 65532
	Source     = "https://github.com/nodewright/nodewright"
)

// OCI annotation keys used as labels (image-spec annotations.md).
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	LabelSource   = "org.opencontainers.image.source"
)

// Binary is the forwarder built for one platform.
type Binary struct {
	Platform v1.Platform // OS and Architecture only
	Path     string      // a static (CGO_ENABLED=0) executable
}

// BuildOptions describe one multi-platform image.
type BuildOptions struct {
	Binaries []Binary
	Version  string    // the binary's version (git describe), also the layout's ref name
	Commit   string    // the full commit hash
	Created  time.Time // the commit's time: files' mtime and the config's created, so a rebuild has the same digest
}

// Build assembles an OCI image index with one image per binary, each the
// empty (scratch) base plus one layer: the binary at Entrypoint (mode 0555),
// the Mozilla/NSS root certificates of golang.org/x/crypto/x509roots at
// CABundle, and /etc/passwd and /etc/group naming the nonroot user. Nothing
// in the image needs to be written at run time, so it runs with
// readOnlyRootFilesystem. The configs carry the OCI labels above.
func Build(o BuildOptions) (v1.ImageIndex, error) {
	if len(o.Binaries) == 0 {
		return nil, fmt.Errorf("binaries: none given")
	}
	if o.Version == "" || o.Commit == "" {
		return nil, fmt.Errorf("version %q and commit %q: both required", o.Version, o.Commit)
	}
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		LabelTitle:    "nodewright-forwarder",
		LabelVersion:  o.Version,
		LabelRevision: o.Commit,
		LabelCreated:  o.Created.UTC().Format(time.RFC3339),
		LabelSource:   Source,
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]bool{}
	for _, b := range o.Binaries {
		p := b.Platform
		if p.OS == "" || p.Architecture == "" || seen[p.String()] {
			return nil, fmt.Errorf("binary %s: platform %q missing or repeated", b.Path, p.String())
		}
		seen[p.String()] = true
		exe, err := os.ReadFile(b.Path)
		if err != nil {
			return nil, fmt.Errorf("binary %s: %w", p.String(), err)
		}
		layer, err := filesLayer(o.Created, []file{
			{name: "etc/", mode: 0o755},
			{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
			{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
			{name: "etc/ssl/", mode: 0o755},
			{name: "etc/ssl/certs/", mode: 0o755},
			{name: strings.TrimPrefix(CABundle, "/"), mode: 0o644, data: certs},
			{name: "home/", mode: 0o755},
			{name: "home/nonroot/", mode: 0o700, uid: nonrootUID},
			{name: "usr/", mode: 0o755},
			{name: "usr/local/", mode: 0o755},
			{name: "usr/local/bin/", mode: 0o755},
			{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o555, data: exe},
		})
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, fmt.Errorf("image %s: %w", p.String(), err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", p.String(), err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
		cf.Created = v1.Time{Time: o.Created.UTC()}
		cf.Config = v1.Config{
			Entrypoint: []string{Entrypoint},
			User:       User,
			WorkingDir: "/",
			Env:        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CABundle, "HOME=/home/nonroot"},
			Labels:     labels,
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, fmt.Errorf("image %s: %w", p.String(), err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}},
		})
	}
	return idx, nil
}

// WriteLayout writes idx as the only entry of a new OCI image layout at
// dir (replacing what was there), named by version
// (org.opencontainers.image.ref.name), and returns the index's digest.
func WriteLayout(dir string, idx v1.ImageIndex, version string) (v1.Hash, error) {
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, fmt.Errorf("layout %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version})); err != nil {
		return v1.Hash{}, fmt.Errorf("layout %s: %w", dir, err)
	}
	return idx.Digest()
}

// ReadLayout returns the image index WriteLayout wrote at dir and the
// version it was named by.
func ReadLayout(dir string) (v1.ImageIndex, string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("layout %s (run make image): %w", dir, err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, "", fmt.Errorf("layout %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("layout %s: %w", dir, err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, "", fmt.Errorf("layout %s: want exactly one image index, found %d entries", dir, len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("layout %s: %w", dir, err)
	}
	return idx, m.Manifests[0].Annotations["org.opencontainers.image.ref.name"], nil
}

// Platform returns idx's image for platform ("linux/amd64").
func Platform(idx v1.ImageIndex, platform string) (v1.Image, error) {
	want, err := v1.ParsePlatform(platform)
	if err != nil {
		return nil, fmt.Errorf("platform %q: %w", platform, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(*want) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("platform %s: not in the image", platform)
}

// ExtractFile returns the content of the file at name (an absolute path)
// in img's flattened filesystem.
func ExtractFile(img v1.Image, name string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(path.Clean(name), "/")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: not in the image", name)
		}
		if err != nil {
			return nil, fmt.Errorf("read image filesystem: %w", err)
		}
		if strings.TrimPrefix(path.Clean(h.Name), "/") == want && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

// file is one entry of a layer; a name ending in "/" is a directory.
type file struct {
	name string
	mode int64
	uid  int
	data []byte
}

// filesLayer returns an OCI layer (gzip) holding files, each owned by root
// unless it names a uid, all with mtime. archive/tar writes the entries;
// go-containerregistry hashes and compresses them.
func filesLayer(mtime time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: mtime.UTC(), Format: tar.FormatPAX}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := w.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", f.name, err)
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, fmt.Errorf("layer %s: %w", f.name, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	content := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(content)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// caBundle returns the unconstrained roots of the NSS trust store (the
// Go module golang.org/x/crypto/x509roots/fallback) as one PEM file. Roots
// with a distrust-after constraint, which a PEM file cannot express, are
// left out: the forwarder only calls AWS endpoints, whose chains end in
// Amazon's or Starfield's unconstrained roots.
func caBundle() ([]byte, error) {
	var out bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("CA bundle: no roots in golang.org/x/crypto/x509roots/fallback")
	}
	return out.Bytes(), nil
}

// platforms returns idx's platforms, sorted ("linux/amd64").
func platforms(idx v1.ImageIndex) ([]string, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range m.Manifests {
		if d.Platform != nil {
			out = append(out, d.Platform.String())
		}
	}
	slices.Sort(out)
	return out, nil
}
