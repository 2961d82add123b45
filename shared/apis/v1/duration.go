package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the literal accepted by expireAfter and consolidateAfter meaning
// "disabled".
const Never = "Never"

// NillableDuration is a duration that may also be "Never" (Duration == nil).
// It round-trips the raw string it was decoded from, so "1h0m" stays "1h0m".
// Follows karpenter: pkg/apis/v1/duration.go.
type NillableDuration struct {
	Duration *time.Duration
	// Raw is the original text ("720h", "Never"); empty when unset.
	Raw string
}

// IsSet reports whether the field was present (a duration or "Never").
func (d NillableDuration) IsSet() bool { return d.Raw != "" || d.Duration != nil }

// IsNever reports whether the value is "Never".
func (d NillableDuration) IsNever() bool { return d.Raw == Never }

// MustParseNillable builds a NillableDuration from "Never" or a Go duration;
// it panics on bad input and is meant for tests and constants only.
func MustParseNillable(s string) NillableDuration {
	var d NillableDuration
	if err := d.UnmarshalJSON([]byte(fmt.Sprintf("%q", s))); err != nil {
		panic(err)
	}
	return d
}

// UnmarshalJSON accepts "Never", a Go duration string, or null. A malformed
// duration is kept in Raw (Duration nil) so that validation can report it
// with its field path instead of failing the whole decode.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30m\" or \"Never\": %w", err)
	}
	*d = NillableDuration{Raw: s}
	if s == Never || s == "" {
		return nil
	}
	if v, err := time.ParseDuration(s); err == nil {
		d.Duration = &v
	}
	return nil
}

// MarshalJSON writes the raw text, or the duration when built in code.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	switch {
	case d.Raw != "":
		return json.Marshal(d.Raw)
	case d.Duration != nil:
		return json.Marshal(d.Duration.String())
	default:
		return []byte("null"), nil
	}
}
