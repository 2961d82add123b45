package main

// version and commit identify the build; `make image` sets them with
// -ldflags -X (git describe and the commit hash), and the image's labels
// carry the same two values.
var (
	version = "dev"
	commit  = "unknown"
)
