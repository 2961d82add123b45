package lambdakit

import (
	"context"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/nodewright/nodewright/internal/logfield"
)

// NewLogger returns a logger writing one JSON object per record to w (the
// function's stdout, which Lambda ships to CloudWatch Logs), at level and
// above, with the forwarder's field set (internal/logfield: Lambda's JSON
// log format's "timestamp", "level", "message"); a record logged with a context from a Lambda invocation also
// carries "requestId", the invocation's AWS request ID, so every line of
// one invocation can be found together. Build it once in main and pass it
// to the handler (STYLE rule 14).
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(requestIDHandler{next: logfield.NewJSONHandler(w, level)})
}

// requestIDHandler adds the request ID of the invocation in ctx.
type requestIDHandler struct{ next slog.Handler }

func (h requestIDHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.next.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{next: h.next.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{next: h.next.WithGroup(name)}
}

// ParseLevel maps a level name (DEBUG, INFO, WARN, ERROR, any case; the
// values of Lambda's AWS_LAMBDA_LOG_LEVEL) to a slog level; "" is INFO.
func ParseLevel(s string) (slog.Level, error) {
	if s == "" {
		return slog.LevelInfo, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, err
	}
	return l, nil
}
