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
		return fmt.Errorf(`expected a duration such as "30m" or "Never", got %s`, jsonKind(b))
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

// Duration is a duration field that keeps the text it was decoded from, so
// that "1h" is written back as "1h" (not "1h0m0s") and validation can check
// the text against Karpenter's patterns. Duration is 0 when Raw does not
// parse; Validate reports such values with their field path. It is used
// where Karpenter uses metav1.Duration (budgets[].duration,
// terminationGracePeriod, kubelet evictionSoftGracePeriod values).
type Duration struct {
	Duration time.Duration
	// Raw is the original text; empty when built in code.
	Raw string
}

// NewDuration builds a Duration from a Go duration (Raw left empty).
func NewDuration(d time.Duration) *Duration { return &Duration{Duration: d} }

// String returns Raw, or the Go form of Duration when Raw is empty.
func (d Duration) String() string {
	if d.Raw != "" {
		return d.Raw
	}
	return d.Duration.String()
}

// UnmarshalJSON accepts a Go duration string. A string that does not parse
// is kept in Raw (Duration 0) for validation to report; a non-string is an
// error.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf(`expected a duration such as "30m", got %s`, jsonKind(b))
	}
	*d = Duration{Raw: s}
	if v, err := time.ParseDuration(s); err == nil {
		d.Duration = v
	}
	return nil
}

// MarshalJSON writes Raw, or Duration in Go form when Raw is empty.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(b []byte) string {
	switch {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "array"
	case b[0] == 't' || b[0] == 'f':
		return "bool"
	case b[0] == '"':
		return "string"
	}
	return "number " + string(b)
}
