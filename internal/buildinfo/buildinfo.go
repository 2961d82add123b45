// Package buildinfo is the one place every nodewright binary (the
// forwarder, each Lambda, the CLI) gets its version and commit from. The
// Makefile sets both with
//
//	-ldflags '-X github.com/nodewright/nodewright/internal/buildinfo.version=<git describe>
//	          -X github.com/nodewright/nodewright/internal/buildinfo.commit=<git rev-parse HEAD>'
//
// A binary built without them (go build, go run, go test) falls back to
// what the Go toolchain stamps into it (runtime/debug.BuildInfo: the
// module version and the vcs.revision setting), else "dev" and "unknown".
package buildinfo

import "runtime/debug"

// Set by the linker (-X); empty when not set.
var (
	version string
	commit  string
)

// Version is the build's version: the -X value, else the main module's
// version as go install stamps it (v1.2.3), else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Commit is the build's full commit hash: the -X value, else the
// toolchain's vcs.revision (with "-dirty" when vcs.modified is true), else
// "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if dirty {
				rev += "-dirty"
			}
			return rev
		}
	}
	return "unknown"
}

// GoVersion is the Go toolchain that built the binary (runtime/debug).
func GoVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown"
}
