package main

import "github.com/nodewright/nodewright/internal/buildinfo"

// version and commit identify the build: internal/buildinfo, which `make
// image` sets with -ldflags -X (git describe and the commit hash); the
// image's labels carry the same two values.
var (
	version = buildinfo.Version()
	commit  = buildinfo.Commit()
)
