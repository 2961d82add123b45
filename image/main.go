// Command image builds, pushes and unpacks the forwarder's container image
// with go-containerregistry, without a Docker engine or a base image from a
// registry (`make image`, `make image-push IMAGE=<repository>`):
//
//	image build -o DIR -version V -commit C -created UNIX linux/amd64=BIN linux/arm64=BIN
//	    writes DIR/oci (an OCI image layout holding one multi-platform index)
//	    and DIR/digest (the index's digest), and prints the digest
//	image push -layout DIR/oci [-o FILE] REPOSITORY
//	    pushes the index as REPOSITORY:<version> with the credentials of the
//	    Docker config (~/.docker/config.json, $DOCKER_CONFIG; credential
//	    helpers such as docker-credential-ecr-login), prints and writes to FILE
//	    the pinned reference REPOSITORY@<digest>
//	image extract -layout DIR/oci -platform linux/amd64 -o FILE
//	    writes the image's entrypoint binary for that platform to FILE
//	image login -u USER REGISTRY < password
//	    stores the password read from stdin for REGISTRY in the Docker config
//	    (or its credential store), as `docker login --password-stdin` does,
//	    for machines without the Docker CLI; for ECR:
//	    aws ecr get-login-password | image login -u AWS <account>.dkr.ecr.<region>.amazonaws.com
//
// It lives in a Go module of its own so the runtime module does not carry
// go-containerregistry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("want a command: build, push, extract or login")
	}
	fs := flag.NewFlagSet("image "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "build":
		out := fs.String("o", "dist/image", "output directory")
		version := fs.String("version", "", "the binary's version (required)")
		commit := fs.String("commit", "", "the commit hash (required)")
		created := fs.String("created", "0", "creation time, Unix seconds (the commit's time)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		secs, err := strconv.ParseInt(*created, 10, 64)
		if err != nil {
			return fmt.Errorf("-created %q: not Unix seconds", *created)
		}
		opts := BuildOptions{Version: *version, Commit: *commit, Created: time.Unix(secs, 0)}
		for _, a := range fs.Args() {
			plat, bin, ok := strings.Cut(a, "=")
			p, err := v1.ParsePlatform(plat)
			if !ok || err != nil {
				return fmt.Errorf("binary %q: want os/arch=path", a)
			}
			opts.Binaries = append(opts.Binaries, Binary{Platform: *p, Path: bin})
		}
		idx, err := Build(opts)
		if err != nil {
			return err
		}
		digest, err := WriteLayout(filepath.Join(*out, "oci"), idx, *version)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, "digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
			return err
		}
		plats, err := platforms(idx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "image %s %s (%s), version %s\n", filepath.Join(*out, "oci"), digest, strings.Join(plats, ", "), *version)
		return nil
	case "push":
		dir := fs.String("layout", "dist/image/oci", "OCI layout written by build")
		out := fs.String("o", "", "file to write the pinned reference to")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("push: want one repository, e.g. 111122223333.dkr.ecr.us-east-1.amazonaws.com/nodewright-forwarder (IMAGE=...)")
		}
		ref, err := Push(ctx, *dir, fs.Arg(0), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, ref)
		if *out != "" {
			return os.WriteFile(*out, []byte(ref+"\n"), 0o644)
		}
		return nil
	case "extract":
		dir := fs.String("layout", "dist/image/oci", "OCI layout written by build")
		platform := fs.String("platform", "linux/amd64", "platform to extract")
		out := fs.String("o", "", "file to write the binary to (required)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *out == "" {
			return errors.New("extract: -o is required")
		}
		idx, _, err := ReadLayout(*dir)
		if err != nil {
			return err
		}
		img, err := Platform(idx, *platform)
		if err != nil {
			return err
		}
		exe, err := ExtractFile(img, Entrypoint)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(*out, exe, 0o755)
	case "login":
		user := fs.String("u", "AWS", "user name (ECR's is AWS)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("login: want one registry host, e.g. 111122223333.dkr.ecr.us-east-1.amazonaws.com (REGISTRY=...)")
		}
		password, err := io.ReadAll(stdin)
		if err != nil {
			return fmt.Errorf("login: read the password from stdin: %w", err)
		}
		if err := Login(config.Dir(), fs.Arg(0), *user, strings.TrimSpace(string(password))); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "login %s: stored in %s\n", fs.Arg(0), filepath.Join(config.Dir(), config.ConfigFileName))
		return nil
	}
	return fmt.Errorf("command %q: want build, push, extract or login", args[0])
}

// Login stores user and password for registry in the Docker config in dir
// (its credential helper when it names one), where authn.DefaultKeychain
// finds them.
func Login(dir, registry, user, password string) error {
	if password == "" {
		return fmt.Errorf("login %s: empty password on stdin", registry)
	}
	if _, err := name.NewRegistry(registry); err != nil || strings.Contains(registry, "/") {
		return fmt.Errorf("login: registry %q: want a host name without a path", registry)
	}
	cf, err := config.Load(dir)
	if err != nil {
		return fmt.Errorf("login: docker config: %w", err)
	}
	if err := cf.GetCredentialsStore(registry).Store(types.AuthConfig{ServerAddress: registry, Username: user, Password: password}); err != nil {
		return fmt.Errorf("login %s: %w", registry, err)
	}
	if err := cf.Save(); err != nil {
		return fmt.Errorf("login %s: %w", registry, err)
	}
	return nil
}

// Push uploads the index of the layout at dir to repository, tagged with
// the layout's version, and returns repository@digest. Registries with
// immutable tags (ECR's IMMUTABLE) refuse to move a tag: when the tag
// already names the same digest Push uploads nothing and succeeds, when it
// names another digest Push fails and says so.
func Push(ctx context.Context, dir, repository string, opts ...remote.Option) (string, error) {
	idx, version, err := ReadLayout(dir)
	if err != nil {
		return "", err
	}
	repo, err := name.NewRepository(repository)
	if err != nil {
		return "", fmt.Errorf("repository %q: %w (give the repository without a tag)", repository, err)
	}
	if version == "" {
		return "", fmt.Errorf("layout %s: no version name", dir)
	}
	tag := repo.Tag(version)
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	opts = append(opts, remote.WithContext(ctx))
	desc, err := remote.Head(tag, opts...)
	var terr *transport.Error
	switch {
	case err == nil && desc.Digest == digest:
		return repo.Digest(digest.String()).String(), nil
	case err == nil:
		return "", fmt.Errorf("push %s: the tag already names %s, this build is %s (tags are immutable: commit, then make image again)", tag, desc.Digest, digest)
	case errors.As(err, &terr) && terr.StatusCode == 404:
	default:
		return "", fmt.Errorf("push %s: %w", tag, err)
	}
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return "", fmt.Errorf("push %s: %w", tag, err)
	}
	return repo.Digest(digest.String()).String(), nil
}
