// Package logfield is the one field set of every nodewright log line, in
// the forwarder and in every Lambda: the record keys (timestamp, level,
// message: Lambda's JSON log format), the names of the objects a line is
// about (Karpenter's: nodeclaim, node, nodepool, command-id), the one key
// an error goes under, and the version and commit of the first line.
// Keys are lower-case kebab-case; the test of this package reads the log
// calls of forwarder/ and functions/ and fails on any other key or on a
// synonym of a key defined here.
package logfield

import (
	"io"
	"log/slog"

	"github.com/nodewright/nodewright/internal/buildinfo"
)

// The keys of the record itself (Lambda's JSON log format,
// lambdacontext.ReplaceAttr): slog's "time" and "msg" are renamed.
const (
	Timestamp = "timestamp"
	Level     = "level"
	Message   = "message"
)

// The object and error keys. The object names are Karpenter's log keys
// (karpenter: the controllers' log.FromContext(...).WithValues calls), in
// lower case.
const (
	// NodeClaim is the NodeClaim's name.
	NodeClaim = "nodeclaim"
	// Node is the Node's name.
	Node = "node"
	// NodePool is the NodePool's name.
	NodePool = "nodepool"
	// NodeClass is the EC2NodeClass's name.
	NodeClass = "nodeclass"
	// CommandID is a disruption command's ID (Karpenter's command-id).
	CommandID = "command-id"
	// InstanceID is an EC2 instance ID (i-0123456789abcdef0).
	InstanceID = "instance-id"
	// Execution is a Step Functions execution's name.
	Execution = "execution"
	// Error is the one key an error goes under (Karpenter's "error").
	Error = "error"
	// Version and Commit identify the build (internal/buildinfo); every
	// process's first line carries both.
	Version = "version"
	Commit  = "commit"
	// GoVersion is the Go toolchain of the build.
	GoVersion = "go-version"
	// Function is the Lambda function's short name (provisioner, gc).
	Function = "function"
)

// ReplaceAttr renames slog's time and message keys to Timestamp and
// Message at the top level (slog.HandlerOptions.ReplaceAttr).
func ReplaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		a.Key = Timestamp
	case slog.MessageKey:
		a.Key = Message
	}
	return a
}

// NewJSONHandler is the handler of every nodewright process: one JSON
// object per record on w, at level and above, with this package's
// record keys.
func NewJSONHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: ReplaceAttr})
}

// Start is the first line of every nodewright process: "starting" with
// the build's Version, Commit and GoVersion (internal/buildinfo), then
// attrs.
func Start(log *slog.Logger, attrs ...any) {
	log.Info("starting", append([]any{
		Version, buildinfo.Version(), Commit, buildinfo.Commit(), GoVersion, buildinfo.GoVersion(),
	}, attrs...)...)
}
